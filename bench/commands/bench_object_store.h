// `shardtrain bench io --data s3://bucket/prefix --cache-dir DIR`: the
// object-store tier before the loader's figures (bench_io.h), in one run:
// - the store's rate: the split fetched cold into the node-local cache by
//   each node's first rank (parallel ranged GETs, every object checked
//   against the manifest), once per connection count of the sweep, side by
//   side with a copy of the same files from the local disk;
// - the cache's hit rate: a second fetch finds every verified copy;
// - time to first batch: the fetch (cold, then warm) plus the streaming
//   loader's open and first batch on the copies.
// Figures are aggregates: bytes of all nodes / the slowest node's time.
#pragma once

#include "bench/commands/bench_io.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace shardtrain::io {

struct ObjectStoreTier {
  std::string local_dir;  // the split's copies, which bench io's loader figures read
  nlohmann::json figures;
};

// Collective over MPI_COMM_WORLD; `say` prints on rank 0.
ObjectStoreTier bench_object_store(const BenchIoOptions& o, int local_rank,
                                   const std::function<void(const std::string&)>& say);

}  // namespace shardtrain::io
