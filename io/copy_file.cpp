// copy_file_limited: a block-by-block copy through a RateLimiter, written
// under a temporary name, fsync'ed and renamed, buffered or with O_DIRECT
// (io/cache.h).
#include "io/cache.h"
#include "io/positional_read.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace shardtrain::io {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { close_quietly(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void close_quietly() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // close(2) reports delayed write errors on some file systems (NFS).
  void close_checked(const std::string& path) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && errno != EINTR)
      throw Error(fmt::format("{}: close failed: {}", path, std::strerror(errno)));
  }

 private:
  int fd_;
};

// Reads up to `n` bytes, fewer only at the end of the file. With O_DIRECT
// (`direct`) a short read is the end: reading on from an offset that is not
// a whole block would fail instead of returning 0.
int64_t read_full(int fd, char* buf, int64_t n, const std::string& path, bool direct) {
  int64_t got = 0;
  while (got < n && !(direct && got > 0)) {
    const ssize_t r = ::read(fd, buf + got, size_t(n - got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    }
    if (r == 0) break;
    got += r;
  }
  return got;
}

void write_full(int fd, const char* buf, int64_t n, const std::string& path) {
  int64_t put = 0;
  while (put < n) {
    const ssize_t w = ::write(fd, buf + put, size_t(n - put));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    }
    put += w;
  }
}

bool stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(std::memory_order_relaxed); }

class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes) {
    ST_CHECK(posix_memalign(&p_, size_t(kDirectAlign), bytes) == 0, "cannot allocate {} aligned bytes", bytes);
  }
  ~AlignedBuffer() { std::free(p_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
};

}  // namespace

CopyStats copy_file_limited(const std::string& src, const std::string& dst, int64_t block_bytes, RateLimiter* limiter,
                            const std::atomic<bool>* stop, bool direct) {
  ST_CHECK(block_bytes > 0, "copying {}: block size must be positive, got {}", src, block_bytes);
  ST_CHECK(!direct || block_bytes % kDirectAlign == 0,
           "copying {} with O_DIRECT: the block ({} bytes) must be whole 4 KiB blocks", src, block_bytes);
  const double t0 = now_seconds();
  CopyStats stats;
  const int direct_flag = direct ? O_DIRECT : 0;
  auto open_error = [&](const std::string& path, const char* what) {
    const std::string why = direct && errno == EINVAL ? "its file system does not take O_DIRECT" : std::strerror(errno);
    return Error(fmt::format("{}: cannot {}{}: {}", path, what, direct ? " with O_DIRECT" : "", why));
  };

  Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC | direct_flag));
  if (in.get() < 0) throw open_error(src, "open");

  const std::filesystem::path dst_dir = std::filesystem::path(dst).parent_path();
  if (!dst_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dst_dir, ec);
    if (ec) throw Error(fmt::format("{}: cannot create the directory: {}", dst_dir.string(), ec.message()));
  }
  const std::string tmp = dst + ".tmp";
  Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | direct_flag, 0644));
  if (out.get() < 0) throw open_error(tmp, "create");

  auto discard = [&] {
    out.close_quietly();
    ::unlink(tmp.c_str());
  };
  try {
    AlignedBuffer buffer{size_t(block_bytes)};  // O_DIRECT needs an aligned one
    char* buf = buffer.data();
    for (;;) {
      if (stopped(stop)) {
        discard();
        stats.seconds = now_seconds() - t0;
        return stats;
      }
      const int64_t n = read_full(in.get(), buf, block_bytes, src, direct);
      if (n == 0) break;
      if (limiter != nullptr) limiter->acquire(n, stop);
      if (stopped(stop)) continue;  // discarded at the top of the loop
      if (direct) {
        // The file's last block, padded to whole 4 KiB blocks (cut below).
        const int64_t whole = (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
        std::memset(buf + n, 0, size_t(whole - n));
        write_full(out.get(), buf, whole, tmp);
      } else {
        write_full(out.get(), buf, n, tmp);
        // Start writing this block back now (no wait): the disk sees the
        // limited rate too, and the final fsync has little left to do.
        ::sync_file_range(out.get(), stats.bytes, n, SYNC_FILE_RANGE_WRITE);
      }
      stats.bytes += n;
      if (n < block_bytes) break;  // end of file
    }
    struct stat st {};
    if (direct && (::fstat(in.get(), &st) != 0 || st.st_size != stats.bytes))
      throw Error(fmt::format("{}: an O_DIRECT read ended at byte {} of {}", src, stats.bytes, int64_t(st.st_size)));
    if (direct && ::ftruncate(out.get(), stats.bytes) != 0)
      throw Error(fmt::format("{}: cannot cut to {} bytes: {}", tmp, stats.bytes, std::strerror(errno)));
    if (::fsync(out.get()) != 0) throw Error(fmt::format("{}: fsync failed: {}", tmp, std::strerror(errno)));
    out.close_checked(tmp);
    if (::rename(tmp.c_str(), dst.c_str()) != 0)
      throw Error(fmt::format("{}: cannot rename to {}: {}", tmp, dst, std::strerror(errno)));
  } catch (...) {
    discard();
    throw;
  }
  // The rename itself is durable once the directory is synced (best effort).
  Fd dir(::open(dst_dir.empty() ? "." : dst_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
  // The source's pages are not needed here again: the cached copy is read from now on.
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_DONTNEED);
  stats.complete = true;
  stats.seconds = now_seconds() - t0;
  return stats;
}

}  // namespace shardtrain::io
