#include "runtime/checkpoint/disk_space.h"

#include "runtime/core/error.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace shardtrain::checkpoint {
namespace {

std::string directory_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void reserve_space(const std::string& path, int64_t bytes) {
  const Fd f{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
  ST_CHECK(f.fd >= 0, "{}: cannot open it to reserve its space: {}", path, std::strerror(errno));
  if (::fallocate(f.fd, FALLOC_FL_KEEP_SIZE, 0, off_t(bytes)) == 0) return;
  const int err = errno;
  if (err == EOPNOTSUPP || err == ENOSYS) return;  // the file system cannot reserve: the writes find out
  throw Error(fmt::format("cannot reserve its {:.1f} MiB: {}", double(bytes) / (1 << 20), std::strerror(err)));
}

std::string close_reserve_path(const std::string& dir) {
  return (std::filesystem::path(dir) / ".reserved-for-close").string();
}

void keep_close_reserve(const std::string& dir) {
  const std::string path = close_reserve_path(dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && int64_t(st.st_blocks) * 512 >= kCloseReserveBytes) return;
  const Fd f{::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)};
  ST_CHECK(f.fd >= 0, "{}: cannot create it: {}", path, std::strerror(errno));
  int err = ::fallocate(f.fd, 0, 0, off_t(kCloseReserveBytes)) == 0 ? 0 : errno;
  if (err == EOPNOTSUPP || err == ENOSYS) {  // no fallocate here: zeros take the blocks
    const std::vector<char> zeros(size_t(kCloseReserveBytes), 0);
    err = ::pwrite(f.fd, zeros.data(), zeros.size(), 0) == ssize_t(zeros.size()) && ::fsync(f.fd) == 0 ? 0 : errno;
  }
  if (err == 0) return;
  ::unlink(path.c_str());
  throw Error(fmt::format("{}: cannot reserve {} KiB to close a failed checkpoint: {}", path, kCloseReserveBytes >> 10,
                          std::strerror(err)));
}

void release_close_reserve(const std::string& dir) { ::unlink(close_reserve_path(dir).c_str()); }

void release_unused_space(const std::string& path) {
  struct stat st {};
  // Truncating to its own length frees the blocks reserved past the end; a
  // failure leaves them allocated until the file is removed, no more.
  if (::stat(path.c_str(), &st) == 0 && ::truncate(path.c_str(), st.st_size) != 0) {
  }
}

std::string free_space_note(const std::string& dir) {
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return "";
  const double free_bytes = double(st.f_bavail) * double(st.f_frsize);
  return fmt::format("; the disk holding {} has {:.1f} MiB free{}", dir, free_bytes / (1 << 20),
                     free_bytes < (1 << 20) ? ": it is full (No space left on device, ENOSPC)" : "");
}

int remove_with_siblings(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".";
  int removed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed{p};
  for (const fs::directory_entry& e : fs::directory_iterator(directory_of(path), ec))
    if (e.path().filename().string().starts_with(prefix)) doomed.push_back(e.path());
  for (const fs::path& f : doomed)
    if (fs::remove(f, ec)) ++removed;
  return removed;
}

}  // namespace shardtrain::checkpoint
