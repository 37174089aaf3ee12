// How the training split is read ([data] in the config, docs/config.md):
// held in memory, or streamed from the shard files by the parallel HDF5
// loader with prefetching (io/loader.h).
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::io {

struct LoaderOptions {
  std::string mode = "memory";          // "memory" | "stream"
  int64_t prefetch_batches = 4;         // stream: ready batches queued ahead of training
  std::string transfer = "independent"; // stream: HDF5 MPI-IO transfer, "independent" | "collective" (docs/io.md)
  bool cold_cache = false;              // stream: drop the shards' pages after reading them
  bool verify_checksums = false;        // stream: check the shards against the manifest's CRC-32 first
  std::string order = "global";         // sampler: "global" shuffle | "shard" (shard order, then a window)
  int64_t shuffle_window = 0;           // order = "shard": samples shuffled together (0: one shard)
  std::string last_batch = "drop";      // sampler: "drop" the last partial global batch | "pad" it
  // stream: deliver the samples' stored bytes (LoadedBatch::raw) instead of
  // normalized floats: token ids of text data. Set by the trainer for a
  // language model, not a config key.
  bool raw = false;
};

// Copying shards from where they live (the shared store) to a local cache
// directory while training runs ([io.stage], io/cache.h).
struct StageOptions {
  bool enabled = false;
  std::string cache_dir;        // local directory (created); shards land in <cache_dir>/<split dir name>/
  double rate_mb_s = 0;         // copy rate limit in MB/s (10^6 bytes); 0 = unlimited
  int64_t block_kib = 1024;     // write block size
  double capacity_gb = 0;       // evict least recently used shards past this (0 = unlimited)
  bool verify = true;           // check each copy against the manifest's checksum
};

}  // namespace shardtrain::io
