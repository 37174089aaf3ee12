#include "io/page_cache.h"

#include "runtime/core/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace shardtrain::io {
namespace {

struct Fd {
  int fd;
  explicit Fd(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    ST_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  }
  ~Fd() { ::close(fd); }
};

}  // namespace

void drop_cached_pages(const std::string& path) {
  Fd f(path);
  drop_cached_pages(f.fd, path);
}

void drop_cached_pages(int fd, const std::string& path_for_errors) {
  const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ST_CHECK(rc == 0, "{}: cannot drop cached pages: {}", path_for_errors, std::strerror(rc));
}

double resident_fraction(const std::string& path) {
  Fd f(path);
  struct stat st {};
  ST_CHECK(fstat(f.fd, &st) == 0, "{}: cannot stat: {}", path, std::strerror(errno));
  if (st.st_size == 0) return 0.0;
  const size_t len = size_t(st.st_size);
  // Mapping does not read the file: only mincore looks at the pages.
  void* map = mmap(nullptr, len, PROT_READ, MAP_SHARED, f.fd, 0);
  ST_CHECK(map != MAP_FAILED, "{}: cannot map: {}", path, std::strerror(errno));
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((len + page - 1) / page);
  const int rc = mincore(map, len, vec.data());
  const int err = errno;
  munmap(map, len);
  ST_CHECK(rc == 0, "{}: mincore failed: {}", path, std::strerror(err));
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return double(resident) / double(vec.size());
}

}  // namespace shardtrain::io
