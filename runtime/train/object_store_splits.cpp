#include "runtime/train/object_store_splits.h"

#include "io/cache.h"
#include "io/manifest.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/core/clock.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace shardtrain::train {
namespace {

// Fetches one split on this node's first rank; every rank returns the local
// directory, or throws what failed on any rank.
// `figures` (rank 0) gets what this node fetched.
std::string fetch_split(const std::string& key, const std::string& url, const Config& config, const comm::MpiEnv& mpi,
                        RunDir& run, nlohmann::json& figures) {
  std::string error, local_dir;
  try {
    ST_CHECK(!config.io.stage.cache_dir.empty(),
             "{} = \"{}\": an s3:// split is read from a local copy: set io.stage.cache_dir to a node-local "
             "directory",
             key, url);
    ST_CHECK(config.data.loader.peer_cache_dir.empty(),
             "{} = \"{}\": io.peer_cache.dir cannot read an s3:// split (it copies from a shared file system); "
             "use io.stage.cache_dir",
             key, url);
    io::StageOptions options = config.io.stage;
    options.enabled = true;
    options.direct_io = false;
    options.verify = true;  // an object is used only once it matches the manifest
    local_dir = io::ShardCache::cache_dir_for(url, options.cache_dir);
    if (mpi.local_rank() == 0) {  // the node's one reader of the store
      io::ShardCache cache(url, options);
      int64_t total = 0;
      for (const io::ManifestShard& s : cache.manifest().shards) total += s.bytes;
      ST_CHECK(options.capacity_gb <= 0 || double(total) <= options.capacity_gb * 1e9,
               "{} = \"{}\": the split is {:.2f} GB, more than io.stage.capacity_gb = {}: an s3:// split is "
               "fetched whole",
               key, url, double(total) / 1e9, options.capacity_gb);
      if (mpi.rank() == 0)
        run.log(fmt::format("[init] data: fetching {} from {} into {} on each node: {} shard(s), {:.1f} MB", url,
                            cache.store_description(), local_dir, cache.manifest().shards.size(), double(total) / 1e6));
      const double t0 = now_seconds();
      const io::StageStats s = cache.run([&](const std::string& line) {
        if (mpi.rank() == 0) run.log("[init] fetch " + line);
      });
      const size_t n = cache.manifest().shards.size();
      if (s.shards_failed > 0 || size_t(s.shards_cached) != n)
        throw Error(
            fmt::format("{} = \"{}\": {} of {} shard(s) could not be fetched whole and matching the "
                        "manifest; nothing was trained. Last error: {}",
                        key, url, n - size_t(s.shards_cached), n, s.last_error));
      const double seconds = now_seconds() - t0;
      figures.push_back({{"key", key},
                         {"url", url},
                         {"store", cache.store_description()},
                         {"local_dir", local_dir},
                         {"bytes", s.bytes_copied},
                         {"seconds", seconds},
                         {"mb_s", s.rate_mb_s()},
                         {"requests", s.store_requests},
                         {"retries", s.store_retries},
                         {"shards", n},
                         {"shards_kept", s.shards_kept}});
      // The loader checks a split against its manifest: the copy gets one.
      io::write_manifest(local_dir, cache.manifest());
      if (mpi.rank() == 0)
        run.log(
            fmt::format("[init] data: {} fetched: {:.1f} MB in {:.2f} s ({:.1f} MB/s, {} request(s), {} "
                        "retried), {} of {} shard(s) already in the cache, every one checked against the "
                        "manifest",
                        url, double(s.bytes_copied) / 1e6, seconds, s.rate_mb_s(), s.store_requests, s.store_retries,
                        s.shards_kept, n));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  comm::agree_or_throw(MPI_COMM_WORLD, error);
  return local_dir;
}

}  // namespace

Config fetch_object_store_splits(const Config& config, const comm::MpiEnv& mpi, RunDir& run) {
  Config local = config;
  nlohmann::json figures = nlohmann::json::array();
  if (io::is_s3_url(config.data.train)) {
    local.data.train = fetch_split("data.train", config.data.train, config, mpi, run, figures);
    local.io.stage.enabled = false;  // the copies are local already
  }
  if (io::is_s3_url(config.data.test))
    local.data.test = fetch_split("data.test", config.data.test, config, mpi, run, figures);
  if (!figures.empty()) run.write_file("object_store.json", figures.dump(2) + "\n");
  return local;
}

}  // namespace shardtrain::train
