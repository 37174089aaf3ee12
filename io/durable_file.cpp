#include "io/durable_file.h"

#include "runtime/core/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace shardtrain::io {
namespace fs = std::filesystem;

namespace {
void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  ST_CHECK(fd >= 0, "{}: cannot open to sync: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  ST_CHECK(rc == 0, "{}: fsync failed: {}", path, std::strerror(err));
}
}  // namespace

void make_parent_directory(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  ST_CHECK(!ec, "{}: cannot create the directory: {}", dir.string(), ec.message());
}

void publish(const std::string& tmp, const std::string& final_path) {
  fsync_path(tmp, O_RDONLY);
  ST_CHECK(std::rename(tmp.c_str(), final_path.c_str()) == 0, "cannot rename {} to {}: {}", tmp, final_path,
           std::strerror(errno));
  const fs::path dir = fs::path(final_path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY);
}

}  // namespace shardtrain::io
