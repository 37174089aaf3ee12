// The job's data: the file system it lives on (and whether HDF5's file
// locking will work there), and its size against this node's memory: a
// data set that fits the page cache is read from memory after the first
// epoch, so a run measures memory, not storage.
#include "runtime/doctor/checks.h"

#include <fmt/format.h>
#include <sys/vfs.h>

#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace shardtrain::doctor {
namespace {

struct FsType {
  long magic;
  const char* name;
  bool network;
};

// From linux/magic.h and the file systems' own headers.
constexpr FsType kFsTypes[] = {
    {0xEF53, "ext4", false},      {0x58465342, "xfs", false},     {0x9123683E, "btrfs", false},
    {0x01021994, "tmpfs", false}, {0x794c7630, "overlay", false}, {0x2FC12FC1, "zfs", false},
    {0x6969, "nfs", true},        {0x0BD00BD0, "lustre", true},   {0x47504653, "gpfs", true},
    {0x19830326, "beegfs", true}, {0x00C36400, "cephfs", true},   {0x65735546, "fuse", true},
    {0xFF534D42, "cifs", true},
};

// Files a start-up check stats at most: a data set of millions of small
// files on a network file system would take minutes.
constexpr int kMaxFiles = 20000;

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

// MemTotal in bytes from /proc/meminfo; 0 when unknown.
double mem_total_bytes(const SysRoot& sys) {
  const auto info = sys.read("/proc/meminfo");
  if (!info) return 0;
  std::stringstream ss(*info);
  for (std::string key; ss >> key;) {
    double kb = 0;
    ss >> kb;
    if (key == "MemTotal:") return kb * 1024;
    ss.ignore(1 << 10, '\n');
  }
  return 0;
}

}  // namespace

void check_data_storage(const ProbeContext& ctx, NodeReport& r) {
  if (ctx.data_path.empty()) return;
  struct statfs st {};
  if (::statfs(ctx.data_path.c_str(), &st) != 0) {
    r.add("data", Verdict::fail, fmt::format("cannot reach the data at {}", ctx.data_path),
          "check data paths in the config and that every node mounts them");
    return;
  }
  std::string type = fmt::format("0x{:x}", static_cast<unsigned long>(st.f_type));
  bool network = false;
  for (const FsType& t : kFsTypes)
    if (static_cast<long>(st.f_type) == t.magic) {
      type = t.name;
      network = t.network;
    }
  double bytes = 0;
  bool partial = false;  // a folder of more files than a start-up check should stat
  std::error_code ec;
  if (fs::is_directory(ctx.data_path, ec)) {
    int files = 0;
    for (fs::recursive_directory_iterator it(ctx.data_path, ec), end; !ec && it != end; it.increment(ec)) {
      if (++files > kMaxFiles) {
        partial = true;
        break;
      }
      if (it->is_regular_file(ec)) bytes += double(it->file_size(ec));
    }
  } else {
    bytes = double(fs::file_size(ctx.data_path, ec));
  }
  const double mem = mem_total_bytes(ctx.sys);
  const std::string locking = ctx.env_or("HDF5_USE_FILE_LOCKING");
  r.facts["data"] = {{"path", ctx.data_path}, {"fs_type", type},  {"network_fs", network},
                     {"bytes", bytes},        {"mem_total", mem}, {"hdf5_file_locking", locking}};
  r.add("data-fs", Verdict::ok,
        fmt::format("{} on {}{}", ctx.data_path, type, network ? " (a network file system)" : ""));
  if (network && locking != "FALSE")
    r.add("hdf5-locking", Verdict::warn,
          fmt::format("HDF5 locks files it opens, and {} may not support it (or makes it slow)", type),
          "if opening data or checkpoints fails with 'unable to lock file', set HDF5_USE_FILE_LOCKING=FALSE");
  if (mem > 0 && partial)
    r.add("page-cache", Verdict::ok,
          fmt::format("the data holds more than {} files ({} in the first of them): not summed at start-up", kMaxFiles,
                      human_bytes(bytes)));
  else if (mem > 0)
    r.add("page-cache", Verdict::ok,
          bytes < 0.5 * mem
              ? fmt::format("the data ({}) fits this node's page cache ({} of memory): after the first epoch it is "
                            "read from memory; `bench io --cold` measures the storage",
                            human_bytes(bytes), human_bytes(mem))
              : fmt::format("the data ({}) does not fit this node's page cache ({} of memory): every epoch reads "
                            "the storage",
                            human_bytes(bytes), human_bytes(mem)));
}

}  // namespace shardtrain::doctor
