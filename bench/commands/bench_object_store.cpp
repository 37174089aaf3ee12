#include "bench/commands/bench_object_store.h"

#include "io/cache.h"
#include "io/manifest.h"
#include "io/stream_loader.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <filesystem>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;

struct NodeRun {
  double mb_s = 0, seconds = 0;  // all nodes' bytes / the slowest node's time
  int64_t requests = 0, retries = 0, kept = 0, shards = 0;
};

// One fetch (or copy) of the split on each node's first rank, every object
// checked; `fresh`: the copies removed first (cold).
NodeRun stage_on_nodes(const std::string& source, const StageOptions& options, bool fresh, int local_rank) {
  NodeRun r;
  double bytes = 0, seconds = 0, counts[3] = {0, 0, 0};
  std::string error;
  if (local_rank == 0) {
    try {
      ShardCache cache(source, options);
      if (fresh) {
        std::error_code ec;
        fs::remove_all(cache.cache_dir(), ec);
        fs::create_directories(cache.cache_dir(), ec);
      }
      const double t0 = now_seconds();
      const StageStats s = cache.run();
      seconds = now_seconds() - t0;
      if (s.shards_failed > 0) error = s.last_error;
      bytes = double(s.bytes_copied);
      counts[0] = double(s.store_requests);
      counts[1] = double(s.store_retries);
      counts[2] = double(s.shards_kept);
      r.shards = int64_t(cache.manifest().shards.size());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int bad = error.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ST_CHECK(!any, "bench io: fetching {} failed{}", source, error.empty() ? " on another node" : ": " + error);
  double sum = 0, slowest = 0, total[3];
  MPI_Allreduce(&bytes, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(counts, total, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Bcast(&r.shards, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  r.seconds = slowest;
  r.mb_s = slowest > 0 ? sum / slowest / 1e6 : 0;
  r.requests = int64_t(total[0]);
  r.retries = int64_t(total[1]);
  r.kept = int64_t(total[2]);
  return r;
}

// The streaming loader's open and first batch on the local copies.
double first_batch_seconds(const BenchIoOptions& o, const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_seconds();
  StreamLoader loader(dir, o.loader, o.global_batch, o.seed);
  loader.start({0, 0}, 1);
  loader.next();
  double mine = now_seconds() - t0, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

ObjectStoreTier bench_object_store(const BenchIoOptions& o, int local_rank,
                                   const std::function<void(const std::string&)>& say) {
  ST_CHECK(!o.cache_dir.empty(), "bench io --data {}: an s3:// split needs --cache-dir (node-local)", o.data);
  ST_CHECK(!o.s3_sweep.empty(), "bench io: --s3-sweep is empty");
  StageOptions options;
  options.enabled = true;
  options.cache_dir = o.cache_dir;
  options.s3 = o.s3;
  ObjectStoreTier tier;
  nlohmann::json sweep = nlohmann::json::array();
  say(
      fmt::format("  object store: {} fetched cold into {} by each node's first rank, {} MiB parts, every "
                  "object checked against the manifest",
                  o.data, o.cache_dir, o.s3.part_mib));
  say(fmt::format("  {:>12} {:>10} {:>10} {:>9} {:>8}", "connections", "MB/s", "seconds", "requests", "retried"));
  NodeRun configured;
  std::vector<int64_t> counts = o.s3_sweep;
  // The configured count last: its copies stay for the figures below.
  counts.erase(std::remove(counts.begin(), counts.end(), o.s3.connections), counts.end());
  counts.push_back(o.s3.connections);
  for (const int64_t c : counts) {
    options.s3.connections = c;
    const NodeRun r = stage_on_nodes(o.data, options, /*fresh=*/true, local_rank);
    say(fmt::format("  {:>12} {:>10.1f} {:>10.2f} {:>9} {:>8}", c, r.mb_s, r.seconds, r.requests, r.retries));
    sweep.push_back({{"connections", c},
                     {"mb_s", r.mb_s},
                     {"seconds", r.seconds},
                     {"requests", r.requests},
                     {"retries", r.retries}});
    configured = r;
  }
  options.s3.connections = o.s3.connections;
  {
    ShardCache cache(o.data, options);  // the copies' directory; the loader checks them against the manifest
    tier.local_dir = cache.cache_dir();
    if (local_rank == 0) write_manifest(tier.local_dir, cache.manifest());
  }
  const double cold_first = first_batch_seconds(o, tier.local_dir);

  // The same files from the local disk, into a second cache: the copy rate
  // the store's rate stands beside.
  StageOptions local = options;
  local.cache_dir = (fs::path(o.cache_dir) / ".bench-local-copy").string();
  const NodeRun disk = stage_on_nodes(tier.local_dir, local, /*fresh=*/true, local_rank);
  if (local_rank == 0) {
    std::error_code ec;
    fs::remove_all(local.cache_dir, ec);
  }
  say(
      fmt::format("  the same files copied from the local disk (page cache warm): {:.1f} MB/s; the store's rate is "
                  "{:.2f}x of it",
                  disk.mb_s, disk.mb_s > 0 ? configured.mb_s / disk.mb_s : 0.0));

  const NodeRun warm = stage_on_nodes(o.data, options, /*fresh=*/false, local_rank);
  const double warm_first = first_batch_seconds(o, tier.local_dir);
  int nodes = local_rank == 0 ? 1 : 0, total_nodes = 0;
  MPI_Allreduce(&nodes, &total_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const double hits = warm.shards > 0 ? double(warm.kept) / double(warm.shards * total_nodes) : 0;
  say(
      fmt::format("  cache: a second fetch found {} of {} shard copies ({:.0f}% hits), checked in {:.2f} s, {} "
                  "request(s)",
                  warm.kept, warm.shards * total_nodes, 100 * hits, warm.seconds, warm.requests));
  say(
      fmt::format("  time to first batch: cold {:.2f} s (fetch {:.2f} s + loader {:.2f} s), warm {:.2f} s (check "
                  "{:.2f} s + loader {:.2f} s)",
                  configured.seconds + cold_first, configured.seconds, cold_first, warm.seconds + warm_first,
                  warm.seconds, warm_first));
  tier.figures = {{"url", o.data},
                  {"part_mib", o.s3.part_mib},
                  {"connections", o.s3.connections},
                  {"sweep", sweep},
                  {"store_mb_s", configured.mb_s},
                  {"local_copy_mb_s", disk.mb_s},
                  {"hit_rate", hits},
                  {"warm_check_s", warm.seconds},
                  {"first_batch_cold_s", configured.seconds + cold_first},
                  {"first_batch_warm_s", warm.seconds + warm_first}};
  return tier;
}

}  // namespace shardtrain::io
