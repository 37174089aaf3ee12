// The checks that span the shard files of one split: they must describe the
// same data (format, split, classes, sample shape, dtype, normalization) and
// be exactly shards 0..num_shards-1, one file each, in name order.
#pragma once

#include "io/shard_reader.h"

#include <string>
#include <vector>

namespace shardtrain::io {

// A shard file's header, without the file kept open.
struct ShardHeaderOf {
  std::string path;
  shard_format::ShardHeader header;
};

// Each file's header, one file open at a time: every open HDF5 file keeps
// its own metadata cache, which thousands of shards would multiply.
std::vector<ShardHeaderOf> read_shard_headers(const std::vector<std::string>& files);

// `path` is what the user gave (a directory or a single file), for messages.
void check_shard_set(const std::string& path, const std::vector<ShardHeaderOf>& shards);

}  // namespace shardtrain::io
