#include "runtime/train/object_store_splits.h"

#include "io/cache.h"
#include "io/manifest.h"
#include "io/peer_cache.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/core/clock.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <vector>

namespace shardtrain::train {
namespace {

// "%" doubled: a name put into an io.peer_cache.dir pattern as itself.
std::string escape_percent(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

// Fetches one split on each node's first rank; every rank returns the local
// directory, or throws what failed on any rank. With the peer cache
// (`peers`) the copies go to the node's io.peer_cache.dir, and with
// `held_only` only the shards that node holds; otherwise every shard goes to
// io.stage.cache_dir. `figures` (rank 0) gets what its node fetched.
std::string fetch_split(const std::string& key, const std::string& url, const Config& config, const comm::MpiEnv& mpi,
                        const std::optional<io::PeerLayout>& peers, bool held_only, RunDir& run,
                        nlohmann::json& figures) {
  std::string error, local_dir;
  try {
    io::StageOptions options = config.io.stage;
    if (peers) {
      options.cache_dir = io::expand_node_dir(config.data.loader.peer_cache_dir, peers->node);
    } else {
      ST_CHECK(!options.cache_dir.empty(),
               "{} = \"{}\": an s3:// split is read from a local copy: set io.stage.cache_dir to a node-local "
               "directory, or io.peer_cache.dir to spread it over the nodes",
               key, url);
    }
    options.enabled = true;
    options.direct_io = false;
    options.verify = true;  // an object is used only once it matches the manifest
    local_dir = io::ShardCache::cache_dir_for(url, options.cache_dir);
    const bool first_of_node =
        peers ? peers->ranks_of_node[size_t(peers->node)].front() == mpi.rank() : mpi.local_rank() == 0;
    if (first_of_node) {  // the node's one reader of the store
      io::ShardCache cache(url, options);
      const size_t n = cache.manifest().shards.size();
      std::vector<int> order;
      int64_t total = 0;
      for (size_t s = 0; s < n; ++s) {
        if (held_only && peers && io::peer_owner(int(s), peers->nodes) != peers->node) continue;
        order.push_back(int(s));
        total += cache.manifest().shards[s].bytes;
      }
      ST_CHECK(options.capacity_gb <= 0 || double(total) <= options.capacity_gb * 1e9,
               "{} = \"{}\": this node's copy is {:.2f} GB, more than io.stage.capacity_gb = {}: an s3:// split is "
               "fetched before training",
               key, url, double(total) / 1e9, options.capacity_gb);
      const std::string share =
          held_only ? fmt::format("its {} of the {} shard(s) (io.peer_cache: each node its share)", order.size(), n)
                    : fmt::format("{} shard(s)", n);
      if (mpi.rank() == 0)
        run.log(fmt::format("[init] data: fetching {} from {} into {} on each node: {}, {:.1f} MB", url,
                            cache.store_description(), local_dir, share, double(total) / 1e6));
      const double t0 = now_seconds();
      // A node may hold none of a split of fewer shards than nodes (run()
      // would take an empty order for every shard).
      io::StageStats s;
      if (!order.empty())
        s = cache.run(
            [&](const std::string& line) {
              if (mpi.rank() == 0) run.log("[init] fetch " + line);
            },
            order);
      if (s.shards_failed > 0 || size_t(s.shards_cached) != order.size())
        throw Error(
            fmt::format("{} = \"{}\": {} of {} shard(s) could not be fetched whole and matching the "
                        "manifest; nothing was trained. Last error: {}",
                        key, url, order.size() - size_t(s.shards_cached), order.size(), s.last_error));
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
                         {"shards_fetched_here", order.size()},
                         {"shards_kept", s.shards_kept}});
      // The loader checks a split against its manifest: the copy gets one
      // (listing every shard, also those other nodes hold).
      io::write_manifest(local_dir, cache.manifest());
      if (mpi.rank() == 0)
        run.log(
            fmt::format("[init] data: {} fetched: {:.1f} MB in {:.2f} s ({:.1f} MB/s, {} request(s), {} "
                        "retried), {} of {} shard(s) already in the cache, every one checked against the "
                        "manifest",
                        url, double(s.bytes_copied) / 1e6, seconds, s.rate_mb_s(), s.store_requests, s.store_retries,
                        s.shards_kept, order.size()));
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
  const bool train_s3 = io::is_s3_url(config.data.train), test_s3 = io::is_s3_url(config.data.test);
  const std::string& peer_dir = config.data.loader.peer_cache_dir;
  std::optional<io::PeerLayout> peers;
  if (!peer_dir.empty() && (train_s3 || test_s3))  // the same on every rank: one collective or none
    peers = io::peer_layout(MPI_COMM_WORLD, int(config.data.loader.peer_ranks_per_node));
  if (train_s3) {
    const size_t before = figures.size();
    local.data.train =
        fetch_split("data.train", config.data.train, config, mpi, peers, peers.has_value(), run, figures);
    if (figures.size() > before) local.data.loader.peer_fetched_bytes = figures.back()["bytes"].get<int64_t>();
    local.io.stage.enabled = false;  // the copies are local already
    if (peers) {
      // Each node holds its share in its peer cache directory, where the
      // loader's peer cache finds it; the other shards come from their nodes.
      local.data.loader.peer_sparse_split = true;
      local.data.loader.peer_cache_dir =
          (std::filesystem::path(peer_dir) / escape_percent(std::filesystem::path(local.data.train).filename()))
              .string();
    }
  }
  if (test_s3)  // the test split is read whole on every rank: each node fetches all of it
    local.data.test = fetch_split("data.test", config.data.test, config, mpi, peers, false, run, figures);
  if (!figures.empty()) run.write_file("object_store.json", figures.dump(2) + "\n");
  return local;
}

}  // namespace shardtrain::train
