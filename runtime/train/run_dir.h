// The run directory: everything a run leaves behind. config.toml (resolved),
// log.txt (everything printed), metrics.jsonl (one object per evaluation),
// result.json. Files are written whole under a temporary name and renamed, so
// a crash never leaves a half-written result.
//
// A full disk must not take the results down with it (telemetry beside them
// may fill it): the directory keeps 1 MiB reserved from the start
// (.reserved-for-results), released when a write of metrics.jsonl or
// result.json finds no space, which is then tried again. A result that still
// cannot be written ends the job with the cause (ENOSPC named). log.txt is a
// copy of what is printed: a failed write warns once and printing goes on.
#pragma once

#include "runtime/core/output_file.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace shardtrain::train {

class RunDir {
 public:
  // Creates `path` (and parents). A directory that already holds a run
  // (metrics.jsonl or result.json) is refused unless `overwrite`, so that no
  // earlier result is silently lost. `append` (a resumed run) continues the
  // directory's log.txt and metrics.jsonl instead. Only the writing rank
  // touches the disk. No room for the reserve is an Error, before training.
  RunDir(std::string path, bool overwrite, bool writer, bool append = false);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  // runs/<config file stem>-<YYYYmmdd-HHMMSS>
  static std::string default_path(const std::string& config_path);

  const std::string& path() const { return path_; }
  // A line to the terminal and to log.txt.
  void log(const std::string& line);
  // A result file, whole (temporary name, fsync, rename).
  void write_file(const std::string& name, const std::string& content);
  void append_metrics(const nlohmann::json& record);

  static constexpr int64_t kReservedBytes = 1 << 20;

 private:
  // Writes all of `text` to fd, releasing the reserve once on ENOSPC;
  // returns 0 or the errno of the failure.
  int write_all(int fd, const std::string& text);
  void release_reserve();

  std::string path_;
  bool writer_;
  OptionalFile log_;
  int metrics_fd_ = -1;
  std::string reserve_path_;  // "" once released
};

}  // namespace shardtrain::train
