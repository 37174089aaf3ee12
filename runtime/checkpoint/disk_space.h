// The disk space a checkpoint needs, claimed before the collective writes
// start. A write that finds the disk full inside a collective MPI-IO call
// fails on the ranks whose bytes did not fit and on no other, and OMPIO's
// two-phase writes can leave the others waiting inside the call: a full disk
// must be found before any rank is inside one, where every rank can agree on
// it. So rank 0 reserves the file's size (fallocate, keeping the file's
// length) right after the file is created, and gives back what HDF5 did not
// use once the file is closed.
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::checkpoint {

// Reserves `bytes` of disk for the open file `path` without changing its
// length. Throws an Error with the bytes needed and the cause when the disk
// cannot hold them (the caller names the file and the free space); does nothing where the file system
// cannot reserve space (fallocate unsupported: the writes themselves find
// out, and the ranks still agree on each write's outcome).
void reserve_space(const std::string& path, int64_t bytes);

// Closing an HDF5 file flushes its metadata, and a flush that fails on a
// full disk fails on some ranks only, which then leave the others inside
// another collective: a failed checkpoint's close must find room. Rank 0
// keeps this much allocated in <dir>/.reserved-for-close (made before the
// first checkpoint file, so a disk already full is an error before HDF5
// opens anything) and frees it before closing a checkpoint that failed.
inline constexpr int64_t kCloseReserveBytes = int64_t(256) << 10;
std::string close_reserve_path(const std::string& dir);
// Makes the reserve if it is not there. Throws an Error with the cause.
void keep_close_reserve(const std::string& dir);
// Removes it (the next keep_close_reserve makes it again).
void release_close_reserve(const std::string& dir);

// Frees the reserved blocks beyond the end of the closed file `path`.
void release_unused_space(const std::string& path);

// "; the disk holding DIR has 12.0 MiB free" (with ": it is full (No space
// left on device, ENOSPC)" under 1 MiB): what a failed write needs beside
// HDF5's message, which says only "file write failed". "" when statvfs fails.
std::string free_space_note(const std::string& dir);

// Removes `path` and every file beside it whose name starts with its name
// followed by "." (what Open MPI's per-process shared-file-pointer component
// leaves when a write fails: "<path>.data.<rank>", "<path>.metadata.<rank>").
// Returns how many files it removed.
int remove_with_siblings(const std::string& path);

}  // namespace shardtrain::checkpoint
