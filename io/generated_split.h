// Writing a split whose samples a program generates (prep synthetic, prep
// tokens): shards of contiguous sample ranges, streamed to HDF5 in bounded
// memory, each checksummed right after it is written, then the manifest.
// The generators own what the samples are; this file owns how a generated
// split reaches the disk, so that every generator writes it the same way.
#pragma once

#include "io/dataset.h"
#include "io/manifest.h"

#include <cstdint>
#include <functional>
#include <string>

namespace shardtrain::io {

struct GeneratedSplit {
  std::string out_dir;  // the split directory: gets part-NNNNN.h5 + manifest.json
  std::string split = "train";
  int64_t samples = 0;  // >= shards
  int shards = 1;       // 1 .. 99999
  Shape sample_shape;
  SampleDType dtype = SampleDType::u8;
  int32_t num_classes = 0;
  // Samples generated and handed to HDF5 at a time (rounded to whole chunks
  // of /x): the writer's memory, whatever the split's size.
  int64_t block_bytes = int64_t(64) << 20;
};

// Generates samples [first, first + count) into x (count samples of the
// split's shape and dtype, back to back) and their labels into y. Every
// sample must be a function of its index only, not of how the writer cuts
// the split into shards and blocks.
using GenerateSamples = std::function<void(int64_t first, int64_t count, void* x, int32_t* y)>;

// Refuses a directory that already holds a data set (shard files or a
// manifest; other files are fine): mixing a new split's shards with an old
// one's would make a split that lies.
void check_new_split_dir(const std::string& dir);

// Refuses a file system without `bytes` free where `dir` is (or would be
// created), before anything is written.
void check_free_space(const std::string& dir, int64_t bytes);

// About the bytes a split takes on disk: samples, labels, checksums, and
// HDF5's own bytes per shard, generously (for check_free_space).
int64_t generated_split_bytes(const GeneratedSplit& split);

// Creates out_dir and writes the split's shards (contiguous ranges
// [n*i/S, n*(i+1)/S)), block_bytes of samples at a time, each shard
// checksummed right after it is written, then the manifest, which it
// returns. `progress` (may be empty) gets a line per shard, and per GB
// within large shards. The caller checks the directory and the space first.
Manifest write_generated_split(const GeneratedSplit& split, const GenerateSamples& generate,
                               const std::function<void(const std::string&)>& progress = {});

}  // namespace shardtrain::io
