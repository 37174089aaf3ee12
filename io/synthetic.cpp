#include "io/synthetic.h"

#include "io/generated_split.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace shardtrain::io {

namespace {

// Rng stream purposes: the bytes and the label of a sample draw from
// different streams, so neither depends on the other's length.
constexpr uint64_t kPurposeBytes = 0x5359'4e58;  // "SYNX"
constexpr uint64_t kPurposeLabel = 0x5359'4e59;  // "SYNY"

void validate(const SyntheticOptions& o) {
  ST_CHECK(!o.out_dir.empty(), "prep synthetic: no output directory (--out)");
  ST_CHECK(o.samples >= 1, "prep synthetic: samples is {}, it must be >= 1", o.samples);
  ST_CHECK(o.sample_bytes >= 1, "prep synthetic: sample bytes is {}, it must be >= 1", o.sample_bytes);
  ST_CHECK(o.shards >= 1 && o.shards <= 99999, "prep synthetic: shards is {}, it must be in [1, 99999]", o.shards);
  ST_CHECK(o.shards <= o.samples, "prep synthetic: shards is {} but there are only {} samples (one at least per shard)",
           o.shards, o.samples);
  ST_CHECK(o.num_classes >= 1, "prep synthetic: classes is {}, it must be >= 1", o.num_classes);
  ST_CHECK(!o.split.empty(), "prep synthetic: the split name is empty");
  ST_CHECK(o.block_bytes >= 1, "prep synthetic: block bytes is {}, it must be >= 1", o.block_bytes);
  ST_CHECK(o.samples <= INT64_MAX / (o.sample_bytes + 4), "prep synthetic: {} samples of {} bytes overflow 64 bits",
           o.samples, o.sample_bytes);
}

}  // namespace

void synthetic_sample(uint64_t seed, int64_t index, int64_t sample_bytes, uint8_t* out) {
  // Little-endian words: the bytes for a seed are the same on every host shardtrain builds for.
  static_assert(std::endian::native == std::endian::little);
  Rng rng(stream_key(seed, kPurposeBytes, uint64_t(index)));
  int64_t i = 0;
  for (; i + 8 <= sample_bytes; i += 8) {
    const uint64_t word = rng.next_u64();
    std::memcpy(out + i, &word, 8);
  }
  if (i < sample_bytes) {
    const uint64_t word = rng.next_u64();
    std::memcpy(out + i, &word, size_t(sample_bytes - i));
  }
}

int32_t synthetic_label(uint64_t seed, int64_t index, int32_t num_classes) {
  return int32_t(Rng(stream_key(seed, kPurposeLabel, uint64_t(index))).below(uint64_t(num_classes)));
}

Manifest prep_synthetic(const SyntheticOptions& o, const std::function<void(const std::string&)>& progress) {
  validate(o);
  GeneratedSplit split;
  split.out_dir = o.out_dir;
  split.split = o.split;
  split.samples = o.samples;
  split.shards = o.shards;
  split.sample_shape = Shape{o.sample_bytes};
  split.dtype = SampleDType::u8;
  split.num_classes = o.num_classes;
  split.block_bytes = o.block_bytes;
  check_new_split_dir(o.out_dir);
  check_free_space(o.out_dir, generated_split_bytes(split));
  return write_generated_split(
      split,
      [&](int64_t first, int64_t count, void* x, int32_t* y) {
        auto* bytes = static_cast<uint8_t*>(x);
        for (int64_t i = 0; i < count; ++i) {
          synthetic_sample(o.seed, first + i, o.sample_bytes, bytes + i * o.sample_bytes);
          y[i] = synthetic_label(o.seed, first + i, o.num_classes);
        }
      },
      progress);
}

}  // namespace shardtrain::io
