#include "runtime/train/run_dir.h"

#include "runtime/core/error.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace shardtrain::train {
namespace fs = std::filesystem;

namespace {
std::FILE* open_or_throw(const fs::path& p, const char* mode) {
  std::FILE* f = std::fopen(p.c_str(), mode);
  ST_CHECK(f != nullptr, "{}: cannot open for writing: {}", p.string(), std::strerror(errno));
  return f;
}
}  // namespace

RunDir::RunDir(std::string path, bool overwrite, bool writer, bool append) : path_(std::move(path)), writer_(writer) {
  if (!writer_) return;
  std::error_code ec;
  fs::create_directories(path_, ec);
  ST_CHECK(!ec, "run directory {}: cannot create: {}", path_, ec.message());
  for (const char* name : {"metrics.jsonl", "result.json"}) {
    ST_CHECK(overwrite || append || !fs::exists(fs::path(path_) / name),
             "run directory {} already holds a run ({} exists); choose another --run-dir or pass "
             "--overwrite",
             path_, name);
  }
  log_ = open_or_throw(fs::path(path_) / "log.txt", append ? "a" : "w");
  metrics_ = open_or_throw(fs::path(path_) / "metrics.jsonl", append ? "a" : "w");
}

RunDir::~RunDir() {
  if (log_) std::fclose(log_);
  if (metrics_) std::fclose(metrics_);
}

std::string RunDir::default_path(const std::string& config_path) {
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return (fs::path("runs") / (fs::path(config_path).stem().string() + "-" + stamp)).string();
}

void RunDir::log(const std::string& line) {
  if (!writer_) return;
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fputs(line.c_str(), log_);
  std::fputc('\n', log_);
  std::fflush(log_);
}

void RunDir::write_file(const std::string& name, const std::string& content) {
  if (!writer_) return;
  const fs::path final_path = fs::path(path_) / name;
  const fs::path tmp = fs::path(path_) / (name + ".tmp");
  std::FILE* f = open_or_throw(tmp, "w");
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const bool closed = std::fclose(f) == 0;
  ST_CHECK(ok && closed, "{}: write failed: {}", tmp.string(), std::strerror(errno));
  fs::rename(tmp, final_path);
}

void RunDir::append_metrics(const nlohmann::json& record) {
  if (!writer_) return;
  const std::string line = record.dump() + "\n";
  std::fputs(line.c_str(), metrics_);
  std::fflush(metrics_);
}

}  // namespace shardtrain::train
