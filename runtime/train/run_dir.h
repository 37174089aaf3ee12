// The run directory: everything a run leaves behind. config.toml (resolved),
// log.txt (everything printed), metrics.jsonl (one object per evaluation),
// result.json. Files are written whole under a temporary name and renamed, so
// a crash never leaves a half-written result.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdio>
#include <string>

namespace shardtrain::train {

class RunDir {
 public:
  // Creates `path` (and parents). A directory that already holds a run
  // (metrics.jsonl or result.json) is refused unless `overwrite`, so that no
  // earlier result is silently lost. `append` (a resumed run) continues the
  // directory's log.txt and metrics.jsonl instead. Only the writing rank
  // touches the disk.
  RunDir(std::string path, bool overwrite, bool writer, bool append = false);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  // runs/<config file stem>-<YYYYmmdd-HHMMSS>
  static std::string default_path(const std::string& config_path);

  const std::string& path() const { return path_; }
  // A line to the terminal and to log.txt.
  void log(const std::string& line);
  void write_file(const std::string& name, const std::string& content);
  void append_metrics(const nlohmann::json& record);

 private:
  std::string path_;
  bool writer_;
  std::FILE* log_ = nullptr;
  std::FILE* metrics_ = nullptr;
};

}  // namespace shardtrain::train
