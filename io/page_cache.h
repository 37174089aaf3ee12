// The page cache, for the cold-cache mode: dropping a file's cached pages
// after reading it makes the next epoch read from storage again, so a data
// set smaller than memory behaves like one larger than it; and measuring how
// much of a file is resident proves that it worked.
#pragma once

#include <string>

namespace shardtrain::io {

// Asks the kernel to drop the file's clean cached pages
// (posix_fadvise(POSIX_FADV_DONTNEED)). Errors name the file.
void drop_cached_pages(const std::string& path);
// The same on an open descriptor: works after the file was unlinked (a
// staged copy evicted while the loader reads it).
void drop_cached_pages(int fd, const std::string& path_for_errors);
// Fraction of the file's pages resident in the page cache (mmap + mincore);
// 0 for an empty file.
double resident_fraction(const std::string& path);

}  // namespace shardtrain::io
