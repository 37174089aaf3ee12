// shardtrain's HDF5 classification format: the names and layout shared by
// the writer and the reader. Version 2 adds /crc32, a checksum per sample
// that the loaders verify on every read; version 1 files (without it) are
// still read, and `prep upgrade` converts them. docs/formats.md is the
// user-facing description; keep the two in step.
#pragma once

#include "io/dataset.h"
#include "runtime/core/shape.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrain::io::shard_format {

inline constexpr const char* kFormat = "shardtrain.classification";
inline constexpr int64_t kVersion = 2;        // what the writers write
inline constexpr int64_t kOldestVersion = 1;  // the oldest the readers read

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
// Version 2: /crc32 [n] uint32, sample i's CRC-32 (sample_crc32).
inline constexpr const char* kChecksums = "/crc32";
inline constexpr const char* kAttrMean = "normalize_mean";
inline constexpr const char* kAttrStd = "normalize_std";

// Target bytes per chunk of /x: large enough for efficient reads, small
// enough that a batch's random samples do not each drag in megabytes.
inline constexpr int64_t kChunkBytes = int64_t(1) << 20;

// What one shard file declares about itself (all of it but the data).
struct ShardHeader {
  int64_t version = kVersion;
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

inline size_t dtype_size(SampleDType dtype) {
  switch (dtype) {
    case SampleDType::u8: return 1;
    case SampleDType::u16: return 2;
    case SampleDType::i32:
    case SampleDType::f32: return 4;
  }
  return 4;
}
// "uint8", "uint16", "int32", "float32": the names in manifest.json and messages.
inline std::string_view dtype_name(SampleDType dtype) { return name_of(dtype); }
// Bytes of one sample of /x.
inline size_t sample_bytes(const ShardHeader& h) { return size_t(h.sample_shape.numel()) * dtype_size(h.dtype); }

// The checksum of one sample in /crc32: zlib's CRC-32 of the sample's
// values as stored little-endian in C order (what a read into native memory
// holds on the little-endian hosts shardtrain runs on), continued over its
// label as a little-endian int32. A flip in the sample, its label or its
// checksum, or metadata that locates any of them elsewhere, makes the three
// disagree.
uint32_t sample_crc32(const void* sample, size_t bytes, int32_t label);
// The same, a sample's bytes in pieces: crc = sample_crc32_update(crc, ...)
// from 0 over each piece in order, then sample_crc32_finish(crc, label).
uint32_t sample_crc32_update(uint32_t crc, const void* bytes, size_t n);
uint32_t sample_crc32_finish(uint32_t crc, int32_t label);

// Checks `count` samples of the shard at `path` against their checksums:
// the k-th, at x + k * sample_bytes, is the shard's sample index_of(k), with
// labels[index_of(k)] and crcs[index_of(k)] (the whole shard's /y and
// /crc32). An Error naming the file, the datasets and the range of the
// samples that disagree, when any do.
template <class IndexOf>
void verify_samples(const std::string& path, const void* x, size_t sample_bytes, int64_t count, IndexOf index_of,
                    const std::vector<int32_t>& labels, const std::vector<uint32_t>& crcs);

struct ChecksumMismatch {
  int64_t first = -1, last = -1, failed = 0, checked = 0;
  int64_t example = -1;               // the first sample found to fail
  uint32_t stored = 0, computed = 0;  // its checksums
  // Sample `index` checked: a failure when the checksums differ.
  void note(int64_t index, uint32_t stored_crc, uint32_t computed_crc) {
    if (stored_crc == computed_crc) return;
    if (failed++ == 0) {
      example = first = last = index;
      stored = stored_crc;
      computed = computed_crc;
    }
    first = std::min(first, index);
    last = std::max(last, index);
  }
};
[[noreturn]] void throw_checksum_mismatch(const std::string& path, const ChecksumMismatch& m);

template <class IndexOf>
void verify_samples(const std::string& path, const void* x, size_t sample_bytes, int64_t count, IndexOf index_of,
                    const std::vector<int32_t>& labels, const std::vector<uint32_t>& crcs) {
  ChecksumMismatch m;
  m.checked = count;
  for (int64_t k = 0; k < count; ++k) {
    const auto i = size_t(index_of(k));
    m.note(int64_t(i), crcs[i],
           sample_crc32(static_cast<const char*>(x) + size_t(k) * sample_bytes, sample_bytes, labels[i]));
  }
  if (m.failed > 0) throw_checksum_mismatch(path, m);
}

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

}  // namespace shardtrain::io::shard_format
