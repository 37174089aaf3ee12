#include "runtime/train/run_dir.h"

#include "runtime/core/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <ctime>
#include <filesystem>

namespace shardtrain::train {
namespace fs = std::filesystem;

namespace {

std::string cause(int err) {
  return errno_text(err) + (err == ENOSPC ? ": the disk holding the run directory is full" : "");
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
  reserve_path_ = (fs::path(path_) / ".reserved-for-results").string();
  const int reserve = ::open(reserve_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(reserve >= 0, "{}: cannot create: {}", reserve_path_, errno_text(errno));
  const int err = posix_fallocate(reserve, 0, kReservedBytes);
  ::close(reserve);
  if (err != 0) {
    ::unlink(reserve_path_.c_str());
    throw Error(fmt::format("run directory {}: cannot reserve {} KiB for metrics.jsonl and result.json: {}", path_,
                            kReservedBytes >> 10, cause(err)));
  }
  log_ = OptionalFile((fs::path(path_) / "log.txt").string(), append ? "a" : "w");
  const std::string metrics = (fs::path(path_) / "metrics.jsonl").string();
  metrics_fd_ = ::open(metrics.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  ST_CHECK(metrics_fd_ >= 0, "{}: cannot open for writing: {}", metrics, errno_text(errno));
}

RunDir::~RunDir() {
  if (metrics_fd_ >= 0) ::close(metrics_fd_);
  if (!reserve_path_.empty()) ::unlink(reserve_path_.c_str());
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
  log_.write(line + "\n");
}

void RunDir::release_reserve() {
  if (reserve_path_.empty()) return;
  ::unlink(reserve_path_.c_str());
  reserve_path_.clear();
}

int RunDir::write_all(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if ((n == 0 || errno == ENOSPC) && !reserve_path_.empty()) {
      release_reserve();
    } else {
      return n == 0 ? ENOSPC : errno;
    }
  }
  return 0;
}

void RunDir::write_file(const std::string& name, const std::string& content) {
  if (!writer_) return;
  const fs::path final_path = fs::path(path_) / name;
  const std::string tmp = (fs::path(path_) / (name + ".tmp")).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "{}: cannot create: {}", tmp, cause(errno));
  int err = write_all(fd, content);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: write failed: {}", final_path.string(), cause(err)));
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  ST_CHECK(!ec, "{}: cannot rename to {}: {}", tmp, final_path.string(), ec.message());
}

void RunDir::append_metrics(const nlohmann::json& record) {
  if (!writer_) return;
  const int err = write_all(metrics_fd_, record.dump() + "\n");
  ST_CHECK(err == 0, "{}/metrics.jsonl: write failed: {}", path_, cause(err));
}

}  // namespace shardtrain::train
