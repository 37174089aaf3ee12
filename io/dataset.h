// A classification data set split in shardtrain's HDF5 format v1
// (docs/formats.md), held in memory by one rank. The parallel, prefetching
// reader for data sets larger than memory is built on the same format.
#pragma once

#include "runtime/core/enum_names.h"
#include "runtime/core/shape.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::io {

// /x's element type (docs/formats.md). uint16 and int32 hold token ids wider
// than a byte (a vocabulary beyond 256: shardtrain prep tokens); a model
// reads them as values, uint8 also as pixels scaled to [0, 1].
enum class SampleDType { u8, u16, i32, f32 };
inline std::span<const EnumName<SampleDType>> enum_names(SampleDType) {
  static constexpr std::array<EnumName<SampleDType>, 4> n = {{{SampleDType::u8, "uint8"},
                                                              {SampleDType::u16, "uint16"},
                                                              {SampleDType::i32, "int32"},
                                                              {SampleDType::f32, "float32"}}};
  return n;
}
// The dtypes whose values are integers: the ones a language model's token
// ids may be stored as.
inline bool holds_token_ids(SampleDType d) { return d != SampleDType::f32; }

// A buffer of samples as stored, with the dtype to read them at: a language
// model's token windows (lm_batch_from_windows) are 1, 2 or 4 bytes a token.
struct RawSamples {
  const uint8_t* bytes = nullptr;
  SampleDType dtype = SampleDType::u8;
};

struct DatasetInfo {
  std::string path;                      // the directory or file given by the user
  std::vector<std::string> shard_files;  // in shard order
  std::vector<int64_t> shard_sizes;      // samples per shard used (after any limit), for the sampler
  std::string split;                     // the files' "split" attribute
  int64_t num_samples = 0;               // across all shards (after any limit)
  Shape sample_shape;                    // e.g. [1, 28, 28]; no batch dimension
  SampleDType dtype = SampleDType::u8;
  int32_t num_classes = 0;
  float normalize_mean = 0.0f;  // input = (x [/255 for uint8] - mean) / std
  float normalize_std = 1.0f;
  // Every shard's bytes matched its CRC-32 in manifest.json when read
  // (false: not asked to, or the split has no manifest).
  bool checksums_verified = false;
  // Stream loader with data.verify_files = false: the shards were not read
  // whole at start (their samples still are checked as read, format v2).
  bool files_not_read = false;
  // Every sample read is checked against its checksum in /crc32 (false:
  // not asked to, or the split is format version 1).
  bool samples_verified = false;
  int64_t sample_numel() const { return sample_shape.numel(); }
  size_t sample_bytes() const;  // a sample as stored: sample_numel() values of dtype
};

class InMemoryDataset {
 public:
  // Opens `path` (a directory of part-*.h5 shard files, or one .h5 file),
  // validates the schema and every label, and reads the first `limit` samples
  // (0 = all) into memory. With `verify` and a manifest.json, each shard's
  // bytes are checked against the manifest's CRC-32 as the shard is read
  // (every shard, also beyond the limit); with `verify`, every sample read
  // is checked against its checksum (format version 2). Any problem is a shardtrain::Error
  // naming the file.
  static InMemoryDataset load(const std::string& path, int64_t limit = 0, bool verify = true);

  const DatasetInfo& info() const { return info_; }
  int64_t size() const { return info_.num_samples; }

  // Gathers samples indices[0..n) into x_out[n, sample_numel] as normalized
  // f32 and their labels into y_out[n].
  void gather(const int64_t* indices, int64_t n, float* x_out, int32_t* y_out) const;
  // The same, raw: the samples' stored bytes (sample_numel values of the
  // split's dtype each, shard_format::sample_bytes) back to back into x_out
  // (integer splits only: token ids of language-model data, docs/formats.md).
  void gather_bytes(const int64_t* indices, int64_t n, uint8_t* x_out, int32_t* y_out) const;

 private:
  DatasetInfo info_;
  std::vector<uint8_t> x_;  // raw sample bytes, num_samples * sample_numel * dtype size
  std::vector<int32_t> y_;
};

}  // namespace shardtrain::io
