// MLPerf-style log lines (":::MLLOG {json}") in mllog.txt of the run
// directory: namespace, time_ms (wall clock, ms since the Unix epoch),
// event_type (POINT_IN_TIME, INTERVAL_START, INTERVAL_END), key, value,
// metadata (file, lineno, and event-specific entries such as epoch_num or
// status), as the MLPerf logging library writes them.
#pragma once

#include "runtime/core/output_file.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace shardtrain::telemetry {

// Where a log call was made: the caller's file and line, filled in by the
// default arguments (GCC and Clang builtins; std::source_location is not
// usable with clang 14 and libstdc++ 12, which the linter runs).
struct CallSite {
  const char* file;
  int line;
  static constexpr CallSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
};

class MlLog {
 public:
  // Writes to `path` (nothing when path is empty: ranks other than 0).
  explicit MlLog(const std::string& path);
  ~MlLog();
  MlLog(const MlLog&) = delete;
  MlLog& operator=(const MlLog&) = delete;

  void event(const std::string& key, const nlohmann::json& value = nullptr,
             const nlohmann::json& metadata = nlohmann::json::object(), CallSite where = CallSite::here());
  void start(const std::string& key, const nlohmann::json& value = nullptr,
             const nlohmann::json& metadata = nlohmann::json::object(), CallSite where = CallSite::here());
  void end(const std::string& key, const nlohmann::json& value = nullptr,
           const nlohmann::json& metadata = nlohmann::json::object(), CallSite where = CallSite::here());

  // The line that would be written (for tests).
  static std::string format(const std::string& event_type, const std::string& key, const nlohmann::json& value,
                            const nlohmann::json& metadata, double time_ms, const CallSite& where);

 private:
  void write(const char* type, const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata,
             const CallSite& where);
  OptionalFile file_;  // a failed write warns once and ends the log there
};

}  // namespace shardtrain::telemetry
