// `shardtrain prep synthetic`: a data set of any size, larger than memory
// included, for storage and input-pipeline experiments. Samples are
// pseudo-random bytes and labels are independent of them (a model learns
// nothing from it beyond chance); what matters is the I/O it causes.
//
// Every sample's bytes and label are a function of (seed, sample index) only,
// not of the shard count or of how the writer buffers, so a reader can check
// any sample it got (synthetic_sample / synthetic_label) and the same seed
// gives the same data set in 1 or 100 shards.
#pragma once

#include "io/manifest.h"

#include <cstdint>
#include <functional>
#include <string>

namespace shardtrain::io {

struct SyntheticOptions {
  std::string out_dir;       // the split directory: gets part-NNNNN.h5 + manifest.json
  int64_t samples = 0;       // >= 1
  int64_t sample_bytes = 0;  // >= 1; /x is uint8 [samples, sample_bytes]
  int shards = 1;            // 1 .. min(samples, 99999)
  int32_t num_classes = 10;  // >= 1
  uint64_t seed = 1;
  std::string split = "train";
  // Samples generated and handed to HDF5 at a time (rounded to whole chunks
  // of /x): the writer's memory, whatever the data set's size. Tests make it
  // small to exercise many appends.
  int64_t block_bytes = int64_t(64) << 20;
};

// The bytes of sample `index` (sample_bytes of them) of the data set of `seed`.
void synthetic_sample(uint64_t seed, int64_t index, int64_t sample_bytes, uint8_t* out);
// Its label, in [0, num_classes).
int32_t synthetic_label(uint64_t seed, int64_t index, int32_t num_classes);

// Writes the shards (contiguous ranges [n*i/S, n*(i+1)/S), streamed in
// bounded memory: block_bytes of samples at a time), each checksummed right
// after it is written, then the manifest. Refuses a directory that already
// holds shards or a manifest, and one on a file system without the space.
// `progress` (may be empty) gets a line per shard, and per GiB within large
// shards. Returns the manifest written.
Manifest prep_synthetic(const SyntheticOptions& options, const std::function<void(const std::string&)>& progress = {});

}  // namespace shardtrain::io
