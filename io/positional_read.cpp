#include "io/positional_read.h"

#include "runtime/core/error.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace shardtrain::io {
namespace {

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};

// The calling thread's bounce buffer, grown to the largest span it read.
char* bounce_buffer(size_t bytes) {
  thread_local std::unique_ptr<void, FreeAligned> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    void* p = nullptr;
    ST_CHECK(posix_memalign(&p, size_t(kDirectAlign), bytes) == 0, "cannot allocate {} aligned bytes", bytes);
    buffer.reset(p);
    capacity = bytes;
  }
  return static_cast<char*>(buffer.get());
}

}  // namespace

void read_at(int fd, void* dst, size_t bytes, int64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, static_cast<char*>(dst) + done, bytes - done, offset + int64_t(done));
    if (n < 0 && errno == EINTR) continue;
    ST_CHECK(n >= 0, "{}: read of {} bytes at {} failed: {}", what, bytes - done, offset + int64_t(done),
             std::strerror(errno));
    ST_CHECK(n > 0, "{}: the file ends at byte {}, before the {} bytes asked for at {} (truncated?)", what,
             offset + int64_t(done), bytes, offset);
    done += size_t(n);
  }
}

void read_direct(int fd, void* dst, size_t bytes, int64_t offset, const std::string& what) {
  std::memcpy(dst, read_direct_view(fd, bytes, offset, what), bytes);
}

const uint8_t* read_direct_view(int fd, size_t bytes, int64_t offset, const std::string& what) {
  const int64_t begin = offset / kDirectAlign * kDirectAlign;
  const int64_t end = (offset + int64_t(bytes) + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  char* span = bounce_buffer(size_t(end - begin));
  int64_t got = 0;  // bytes of the span read; the file may end inside its last block
  while (begin + got < offset + int64_t(bytes)) {
    const ssize_t n = ::pread(fd, span + got, size_t(end - begin - got), begin + got);
    if (n < 0 && errno == EINTR) continue;
    ST_CHECK(n >= 0, "{}: O_DIRECT read of {} bytes at {} failed: {}", what, end - begin - got, begin + got,
             std::strerror(errno));
    ST_CHECK(n > 0, "{}: the file ends at byte {}, before the {} bytes asked for at {} (truncated?)", what, begin + got,
             bytes, offset);
    got += n;
  }
  return reinterpret_cast<const uint8_t*>(span + (offset - begin));
}

}  // namespace shardtrain::io
