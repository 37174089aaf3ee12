// Whole reads at a file offset (pread until every byte is in), through the
// page cache or with O_DIRECT. O_DIRECT itself takes only 4 KiB-aligned
// offsets, lengths and buffers: the aligned span around the request is read
// into a buffer of the calling thread and the asked-for bytes copied out.
// O_DIRECT reads skip the page cache: for a data set larger than memory,
// read in random order, the cache only costs (a copy into it, an eviction
// out of it) and holds nothing that is read again within the epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardtrain::io {

inline constexpr int64_t kDirectAlign = 4096;

// Read `bytes` at `offset` into `dst`; throw an Error starting with `what`
// (the file and what was read) on a failed read, or one that ends before
// `offset + bytes` (a truncated file).
void read_at(int fd, void* dst, size_t bytes, int64_t offset, const std::string& what);
void read_direct(int fd, void* dst, size_t bytes, int64_t offset, const std::string& what);
// read_direct without the copy out: the bytes where they landed, in the
// calling thread's buffer, valid until the thread's next O_DIRECT read.
const uint8_t* read_direct_view(int fd, size_t bytes, int64_t offset, const std::string& what);

}  // namespace shardtrain::io
