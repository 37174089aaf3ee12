// `shardtrain prep fashion-mnist`: converts the Fashion-MNIST idx.gz files of
// Debian's dataset-fashion-mnist package into HDF5 format v1.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace shardtrain::io {

struct FashionMnistPrepOptions {
  std::string source_dir = "/usr/share/datasets/fashion-mnist";
  std::string out_dir = "data/fashion-mnist";  // gets train/ and test/ shard directories
  int shards = 1;                              // shard files per split
};

struct PrepSummary {
  int64_t train_samples = 0, test_samples = 0;
  int shards = 0;
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz, checks magic numbers,
// dimensions, counts and labels, and writes out_dir/{train,test}/part-NNNNN.h5.
// Existing shard files of a split are replaced. `progress` (may be empty)
// receives one line per file written.
PrepSummary prep_fashion_mnist(const FashionMnistPrepOptions& options,
                               const std::function<void(const std::string&)>& progress = {});

}  // namespace shardtrain::io
