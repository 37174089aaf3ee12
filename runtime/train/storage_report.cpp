#include "runtime/train/storage_report.h"

#include "io/memory_limit.h"
#include "runtime/train/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

namespace shardtrain::train {

double StorageFigures::hit_ratio() const {
  if (storage_bytes < 0 || loader_bytes <= 0) return -1;
  return std::clamp(1.0 - storage_bytes / loader_bytes, 0.0, 1.0);
}

StorageFigures measure_storage(comm::Communicator* comm, const std::vector<std::string>& shard_files,
                               int64_t storage_bytes_at_start, const io::LoaderStats& loader) {
  const int64_t now = io::storage_read_bytes();
  const double mine_storage = now >= 0 && storage_bytes_at_start >= 0 ? double(now - storage_bytes_at_start) : -1;
  const std::vector<double> mine = {mine_storage, double(loader.bytes), double(loader.staged_bytes),
                                    double(loader.peer_bytes), double(loader.fetched_bytes)};
  const std::vector<std::vector<double>> all =
      comm ? gather_from_ranks(*comm, mine) : std::vector<std::vector<double>>{mine};
  StorageFigures f;
  f.storage_bytes = 0;
  f.peer_cache = !loader.peer_cache.empty();
  for (const std::vector<double>& r : all) {
    f.loader_bytes += r[1];
    f.staged_bytes += r[2];
    f.peer_bytes += r[3];
    f.fetched_bytes += r[4];
    f.storage_bytes = r[0] < 0 || f.storage_bytes < 0 ? -1 : f.storage_bytes + r[0];
  }
  for (const std::string& file : shard_files) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (!ec) f.data_bytes += double(size);
  }
  std::string where;
  if (const std::optional<int64_t> limit = io::cgroup_memory_limit(&where)) {
    f.limit_bytes = double(*limit);
    f.limit_file = where;
  }
  f.memory_bytes = double(io::memory_for_page_cache());
  return f;
}

nlohmann::json to_json(const StorageFigures& f) {
  using nlohmann::json;
  const double hit = f.hit_ratio();
  return {{"data_bytes", f.data_bytes},
          {"memory_bytes", f.memory_bytes},
          {"memory_limit_bytes", f.limit_bytes >= 0 ? json(f.limit_bytes) : json(nullptr)},
          {"memory_limit_file", f.limit_file.empty() ? json(nullptr) : json(f.limit_file)},
          {"loader_bytes", f.loader_bytes},
          {"storage_read_bytes", f.storage_bytes >= 0 ? json(f.storage_bytes) : json(nullptr)},
          {"cache_hit_ratio", hit >= 0 ? json(hit) : json(nullptr)},
          {"peer_cache", f.peer_cache ? json{{"shared_store_bytes", f.staged_bytes},
                                             {"object_store_bytes", f.fetched_bytes},
                                             {"node_cache_bytes", f.loader_bytes - f.peer_bytes},
                                             {"peer_bytes", f.peer_bytes}}
                                      : json(nullptr)}};
}

std::string storage_line(const StorageFigures& f) {
  const std::string memory =
      f.limit_bytes >= 0 ? fmt::format("a memory limit of {:.2f} GB ({})", f.limit_bytes / 1e9, f.limit_file)
                         : fmt::format("the node's {:.2f} GB of memory (no cgroup limit)", f.memory_bytes / 1e9);
  const double hit = f.hit_ratio();
  const std::string read =
      hit < 0
          ? fmt::format("the loaders read {:.2f} GB (bytes from storage are not counted here)", f.loader_bytes / 1e9)
          : fmt::format("the loaders read {:.2f} GB, {:.2f} GB of it from storage: page-cache hit ratio {:.1f}%",
                        f.loader_bytes / 1e9, f.storage_bytes / 1e9, 100 * hit);
  std::string line = fmt::format("[summary] storage: data set {:.2f} GB against {} ({:.2f}x); {}", f.data_bytes / 1e9,
                                 memory, f.data_bytes / std::max(f.memory_bytes, 1.0), read);
  if (f.peer_cache)
    line += fmt::format(
        "\n[summary] storage tiers (all ranks): {:.3f} GB {} at start, {:.3f} GB read from the nodes' own copies, "
        "{:.3f} GB from other nodes over MPI",
        (f.fetched_bytes > 0 ? f.fetched_bytes : f.staged_bytes) / 1e9,
        f.fetched_bytes > 0 ? "fetched from the object store" : "copied from the shared store",
        (f.loader_bytes - f.peer_bytes) / 1e9, f.peer_bytes / 1e9);
  return line;
}

}  // namespace shardtrain::train
