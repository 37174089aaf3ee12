#include "io/synthetic_tokens.h"

#include "io/generated_split.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

namespace shardtrain::io {

namespace {

namespace fs = std::filesystem;

// Rng stream purposes: each split's windows and the successor table draw
// from streams of their own, so none depends on another's length.
constexpr uint64_t kPurposeTrain = 0x544f'4b54;      // "TOKT"
constexpr uint64_t kPurposeTest = 0x544f'4b45;       // "TOKE"
constexpr uint64_t kPurposeSuccessor = 0x544f'4b53;  // "TOKS"

// Octave b of the unigram draw: ids [2^b - 1, min(2^(b+1) - 1, V)).
struct Octave {
  int64_t lo, hi;
};
Octave octave(int64_t vocab, int b) { return {(int64_t(1) << b) - 1, std::min((int64_t(2) << b) - 1, vocab)}; }

int64_t unigram(Rng& rng, int64_t vocab) {
  const Octave o = octave(vocab, int(rng.below(uint64_t(std::bit_width(uint64_t(vocab))))));
  return o.lo + int64_t(rng.below(uint64_t(o.hi - o.lo)));
}

void validate(const TokenPrepOptions& o) {
  ST_CHECK(!o.out_dir.empty(), "prep tokens: no output directory (--out)");
  ST_CHECK(o.vocab >= 2 && o.vocab <= std::numeric_limits<int32_t>::max(),
           "prep tokens: vocabulary is {}, it must be in [2, {}] (ids are stored as uint16 up to 65536, int32 above)",
           o.vocab, std::numeric_limits<int32_t>::max());
  ST_CHECK(o.block_size >= 1, "prep tokens: block size is {}, it must be >= 1", o.block_size);
  ST_CHECK(o.samples >= 1, "prep tokens: samples is {}, it must be >= 1", o.samples);
  ST_CHECK(o.test_samples >= 0, "prep tokens: test samples is {}, it must be >= 1 (or 0: a tenth of the samples)",
           o.test_samples);
  ST_CHECK(o.shards >= 1 && o.shards <= 99999, "prep tokens: shards is {}, it must be in [1, 99999]", o.shards);
  ST_CHECK(o.shards <= o.samples, "prep tokens: shards is {} but there are only {} samples (one at least per shard)",
           o.shards, o.samples);
  ST_CHECK(o.block_bytes >= 1, "prep tokens: block bytes is {}, it must be >= 1", o.block_bytes);
  // A sample's bytes must fit a chunk (ShardWriter: < 4 GiB), and the
  // split's bytes 64 bits.
  ST_CHECK(o.block_size < (int64_t(1) << 28), "prep tokens: block size {} is too large (a sample must be < 1 GiB)",
           o.block_size);
  ST_CHECK(o.samples + o.test_samples <= std::numeric_limits<int64_t>::max() / (4 * (o.block_size + 1) + 8),
           "prep tokens: {} samples of {} tokens overflow 64 bits", o.samples, o.block_size + 1);
}

// Windows [first, first + count) of a split into x, as the split's dtype.
void generate_windows(const TokenPrepOptions& o, TokenSplit split, SampleDType dtype, int64_t first, int64_t count,
                      void* x, int32_t* y) {
  const int64_t length = o.block_size + 1;
  std::vector<int32_t> window(static_cast<size_t>(length));
  for (int64_t i = 0; i < count; ++i) {
    synthetic_token_window(o.seed, split, first + i, o.vocab, length, window.data());
    y[i] = window.back();
    if (dtype == SampleDType::i32) {
      std::memcpy(static_cast<int32_t*>(x) + i * length, window.data(), window.size() * sizeof(int32_t));
    } else {
      uint16_t* out = static_cast<uint16_t*>(x) + i * length;
      for (int64_t t = 0; t < length; ++t) out[t] = uint16_t(window[size_t(t)]);
    }
  }
}

}  // namespace

SampleDType token_dtype(int64_t vocab) { return vocab <= 65536 ? SampleDType::u16 : SampleDType::i32; }

double token_unigram_probability(int64_t vocab, int64_t id) {
  ST_CHECK(vocab >= 2 && id >= 0 && id < vocab, "token id {} is not in [0, {})", id, vocab);
  const int b = int(std::bit_width(uint64_t(id + 1))) - 1;  // id's octave: 2^b - 1 <= id < 2^(b+1) - 1
  const Octave o = octave(vocab, b);
  return 1.0 / double(int(std::bit_width(uint64_t(vocab)))) / double(o.hi - o.lo);
}

int64_t token_successor(uint64_t seed, int64_t vocab, int64_t id) {
  return int64_t(Rng(stream_key(seed, kPurposeSuccessor, uint64_t(id))).below(uint64_t(vocab)));
}

void synthetic_token_window(uint64_t seed, TokenSplit split, int64_t index, int64_t vocab, int64_t length,
                            int32_t* out) {
  Rng rng(stream_key(seed, split == TokenSplit::train ? kPurposeTrain : kPurposeTest, uint64_t(index)));
  int64_t id = unigram(rng, vocab);
  out[0] = int32_t(id);
  for (int64_t t = 1; t < length; ++t) {
    id = rng.below(4) < 3 ? token_successor(seed, vocab, id) : unigram(rng, vocab);
    out[t] = int32_t(id);
  }
}

TokenPrepSummary prep_tokens(const TokenPrepOptions& o, const std::function<void(const std::string&)>& progress) {
  validate(o);
  TokenPrepSummary summary;
  summary.dtype = token_dtype(o.vocab);
  summary.train_samples = o.samples;
  summary.test_samples = o.test_samples > 0 ? o.test_samples : std::max<int64_t>(1, o.samples / 10);

  GeneratedSplit train;
  train.out_dir = (fs::path(o.out_dir) / "train").string();
  train.split = "train";
  train.samples = summary.train_samples;
  train.shards = o.shards;
  train.sample_shape = Shape{o.block_size + 1};
  train.dtype = summary.dtype;
  train.num_classes = int32_t(o.vocab);
  train.block_bytes = o.block_bytes;
  GeneratedSplit test = train;
  test.out_dir = (fs::path(o.out_dir) / "test").string();
  test.split = "test";
  test.samples = summary.test_samples;
  test.shards = 1;

  // Both splits are checked before either is written.
  check_new_split_dir(train.out_dir);
  check_new_split_dir(test.out_dir);
  check_free_space(o.out_dir, generated_split_bytes(train) + generated_split_bytes(test));
  for (const auto& [g, split] : {std::pair{&train, TokenSplit::train}, std::pair{&test, TokenSplit::test}}) {
    const Manifest m = write_generated_split(
        *g,
        [&, split = split, dtype = g->dtype](int64_t first, int64_t count, void* x, int32_t* y) {
          generate_windows(o, split, dtype, first, count, x, y);
        },
        progress);
    for (const ManifestShard& shard : m.shards) summary.bytes += shard.bytes;
  }
  return summary;
}

}  // namespace shardtrain::io
