// shardtrain's HDF5 classification format, version 1: the names and layout
// shared by the writer and the reader. docs/formats.md is the user-facing
// description; keep the two in step.
#pragma once

#include "io/dataset.h"
#include "runtime/core/shape.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::io::format_v1 {

inline constexpr const char* kFormat = "shardtrain.classification";
inline constexpr int64_t kVersion = 1;

// Root-group attributes of every shard file.
inline constexpr const char* kAttrFormat = "format";
inline constexpr const char* kAttrVersion = "format_version";
inline constexpr const char* kAttrSplit = "split";
inline constexpr const char* kAttrNumClasses = "num_classes";
inline constexpr const char* kAttrShardIndex = "shard_index";
inline constexpr const char* kAttrNumShards = "num_shards";
// Datasets, and the optional normalization attributes of /x.
inline constexpr const char* kX = "/x";
inline constexpr const char* kY = "/y";
inline constexpr const char* kAttrMean = "normalize_mean";
inline constexpr const char* kAttrStd = "normalize_std";

// Target bytes per chunk of /x: large enough for efficient reads, small
// enough that a batch's random samples do not each drag in megabytes.
inline constexpr int64_t kChunkBytes = int64_t(1) << 20;

// What one shard file declares about itself (all of it but the data).
struct ShardHeader {
  std::string split;
  int32_t num_classes = 0;
  int32_t shard_index = 0;
  int32_t num_shards = 1;
  int64_t num_samples = 0;
  Shape sample_shape;  // no batch dimension
  SampleDType dtype = SampleDType::u8;
  float normalize_mean = 0.0f;
  float normalize_std = 1.0f;
};

inline size_t dtype_size(SampleDType dtype) { return dtype == SampleDType::u8 ? 1 : 4; }
inline const char* dtype_name(SampleDType dtype) { return dtype == SampleDType::u8 ? "uint8" : "float32"; }

// "part-00007.h5"
std::string shard_file_name(int index);

// True for names of the form part-NNNNN.h5 (exactly 5 digits); sets *index.
bool parse_shard_file_name(const std::string& name, int* index);

// The shard files of a split, in name order: `path` is either a directory of
// part-NNNNN.h5 files, or a single file. Other names are ignored, so a
// manifest or a .tmp file left by an interrupted write does not count, except
// that part-*.h5 with other than 5 digits is an Error (a shard the user meant
// but that would be skipped). A missing path or a directory without shards is
// an Error naming the path.
std::vector<std::string> list_shard_files(const std::string& path);

}  // namespace shardtrain::io::format_v1
