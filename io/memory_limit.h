// How much memory the page cache can use for this process, and how much of
// what it read came from storage: the memory limit of its cgroup (v2
// memory.max or v1 memory.limit_in_bytes, the smallest on its path, which is
// what launch/memlimit and Slurm's cgroup plugin set) against the node's
// memory, and /proc/self/io's read_bytes (reads that reached the block layer;
// a page-cache hit adds nothing). A storage study records both (docs/io.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shardtrain::io {

// The node's physical memory, bytes.
int64_t node_memory_bytes();

// The smallest memory limit on this process's cgroup path, bytes; nullopt
// when there is none (or cgroups are not mounted where it can read them).
// `where` receives the limit file's path.
std::optional<int64_t> cgroup_memory_limit(std::string* where = nullptr);

// What the page cache can hold for this process: the node's memory, or the
// cgroup's limit when that is smaller.
int64_t memory_for_page_cache();

// Bytes this process has read from storage so far (all its threads;
// /proc/self/io read_bytes); -1 where the kernel does not count them.
int64_t storage_read_bytes();

}  // namespace shardtrain::io
