// MLPerf-style log lines. The MLPerf logging library (Python) writes
// json.dumps output: keys in insertion order, ", " and ": " separators; the
// lines here have the same shape so that its compliance checker and any
// script written for it read them unchanged.
#include "runtime/telemetry/mllog.h"

#include "runtime/core/error.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string_view>

namespace shardtrain::telemetry {
namespace {

using nlohmann::json;

// A JSON string literal; invalid UTF-8 (from a user's path, say) is replaced, not thrown on.
std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

// json.dumps' layout: {"a": 1, "b": [1, 2]}.
void append_python_style(std::string& out, const json& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += quoted(k);
      out += ": ";
      append_python_style(out, x);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      append_python_style(out, v[i]);
    }
    out += ']';
  } else {
    out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

// The source file relative to the repository root ("runtime/train/trainer.cpp"),
// as MLPerf logs show it. The root is where this very file sits, two folders
// up: every file of the project is compiled with the same kind of path.
std::string repo_relative(std::string_view file) {
  constexpr std::string_view self = __FILE__;
  constexpr std::string_view tail = "runtime/telemetry/mllog.cpp";
  if (self.size() >= tail.size() && self.ends_with(tail)) {
    const std::string_view root = self.substr(0, self.size() - tail.size());
    if (!root.empty() && file.starts_with(root)) return std::string(file.substr(root.size()));
  }
  return std::string(file);
}

double wall_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

MlLog::MlLog(const std::string& path) {
  if (path.empty()) return;
  file_ = OptionalFile(path, "w");
}

MlLog::~MlLog() = default;

void MlLog::event(const std::string& key, const json& value, const json& metadata, CallSite where) {
  write("POINT_IN_TIME", key, value, metadata, where);
}

void MlLog::start(const std::string& key, const json& value, const json& metadata, CallSite where) {
  write("INTERVAL_START", key, value, metadata, where);
}

void MlLog::end(const std::string& key, const json& value, const json& metadata, CallSite where) {
  write("INTERVAL_END", key, value, metadata, where);
}

std::string MlLog::format(const std::string& event_type, const std::string& key, const json& value,
                          const json& metadata, double time_ms, const CallSite& where) {
  std::string line = ":::MLLOG {\"namespace\": \"\", \"time_ms\": ";
  line += std::to_string(std::llround(time_ms));
  line += ", \"event_type\": ";
  line += quoted(event_type);
  line += ", \"key\": ";
  line += quoted(key);
  line += ", \"value\": ";
  append_python_style(line, value);
  line += ", \"metadata\": {\"file\": ";
  line += quoted(repo_relative(where.file));
  line += ", \"lineno\": ";
  line += std::to_string(where.line);
  if (metadata.is_object()) {
    for (const auto& [k, v] : metadata.items()) {
      if (k == "file" || k == "lineno") continue;  // the call site's, above
      line += ", ";
      line += quoted(k);
      line += ": ";
      append_python_style(line, v);
    }
  }
  line += "}}";
  return line;
}

void MlLog::write(const char* type, const std::string& key, const json& value, const json& metadata,
                  const CallSite& where) {
  if (!file_.ok()) return;
  const std::string line = format(type, key, value, metadata, wall_ms(), where) + "\n";
  // One write per line (stdio locks the stream: lines never interleave),
  // flushed so that a run that crashes keeps its log up to the crash.
  file_.write(line);
}

}  // namespace shardtrain::telemetry
