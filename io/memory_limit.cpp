#include "io/memory_limit.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace shardtrain::io {
namespace {

struct CgroupMount {
  std::string root, point;  // the mount's root within the hierarchy, and where it is mounted
  bool v2 = false;
};

// The mounts of the v2 hierarchy and of v1's memory controller (/proc/self/mountinfo).
std::vector<CgroupMount> memory_mounts() {
  std::vector<CgroupMount> mounts;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, word;
    fields >> id >> parent >> dev >> root >> point;
    while (fields >> word && word != "-") {
    }
    std::string fstype, source, options;
    fields >> fstype >> source >> options;
    const bool v1_memory = fstype == "cgroup" && ("," + options + ",").find(",memory,") != std::string::npos;
    if (fstype == "cgroup2" || v1_memory) mounts.push_back({root, point, fstype == "cgroup2"});
  }
  return mounts;
}

// This process's cgroup path in the v2 hierarchy ("0::") or v1's memory one.
std::string cgroup_path(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool match = v2 ? line.starts_with("0::") : ("," + controllers + ",").find(",memory,") != std::string::npos;
    if (match) return line.substr(b + 1);
  }
  return {};
}

std::optional<int64_t> read_limit(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    const long long v = std::stoll(text);
    // v1 writes "no limit" as the largest page-aligned value.
    return v > 0 && v < (int64_t(1) << 60) ? std::optional<int64_t>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

int64_t node_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

std::optional<int64_t> cgroup_memory_limit(std::string* where) {
  std::optional<int64_t> smallest;
  for (const CgroupMount& m : memory_mounts()) {
    std::string path = cgroup_path(m.v2);
    if (path.empty() || !path.starts_with(m.root)) continue;
    path = path.substr(m.root == "/" ? 0 : m.root.size());
    const std::string file = m.v2 ? "memory.max" : "memory.limit_in_bytes";
    // Every level up to the mount's root: a parent's limit binds as well.
    for (;;) {
      const std::string candidate = m.point + (path == "/" ? "" : path) + "/" + file;
      if (const std::optional<int64_t> v = read_limit(candidate); v && (!smallest || *v < *smallest)) {
        smallest = v;
        if (where) *where = candidate;
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return smallest;
}

int64_t memory_for_page_cache() {
  const int64_t node = node_memory_bytes();
  const std::optional<int64_t> limit = cgroup_memory_limit();
  return limit ? std::min(node, *limit) : node;
}

int64_t storage_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value)
    if (key == "read_bytes:") return value;
  return -1;
}

}  // namespace shardtrain::io
