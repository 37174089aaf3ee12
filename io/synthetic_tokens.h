// `shardtrain prep tokens`: synthetic language-model data with a vocabulary
// of any size (GPT-2's 50257, say), for throughput runs of a model whose
// real corpus and tokenizer are not at hand.
//
// A sample is a window of T+1 token ids in [0, V), stored as uint16 when
// V <= 65536 and as int32 above (docs/formats.md, "Synthetic token data").
// The windows are not uniform noise, so that a short run shows the loss
// falling below ln V, as real text would. The "language", a function of the
// seed alone (the same for both splits):
//
// - the unigram draw: an octave b uniform in [0, L), L = bit_width(V), then
//   an id uniform in octave b's ids [2^b - 1, min(2^(b+1) - 1, V)). Id k is
//   drawn with probability about 1 / (L (k + 1)): Zipf-like, id 0 the most
//   frequent; integer arithmetic only, so the ids are the same on every host.
// - the successor table: every id v has one successor, an id drawn uniformly
//   from [0, V) by a stream keyed by the seed and v.
// - a window: its first id is a unigram draw; each next one is the successor
//   of the one before with probability 3/4, else a unigram draw.
//
// A model that knew the rule would reach a per-token loss of about
// -(3/4) ln(3/4) + 1/4 (H_unigram + ln 4): 2.5 nats for V = 50257, where
// ln V = 10.8 and H_unigram = 7.9; one that knew only how often each id
// occurs, about 8.9 nats there (computed, not measured). Every window is a
// function of (seed, split, index) only, so the same seed gives the same
// data in any number of shards.
#pragma once

#include "io/dataset.h"

#include <cstdint>
#include <functional>
#include <string>

namespace shardtrain::io {

struct TokenPrepOptions {
  std::string out_dir;       // gets train/ and test/ split directories
  int64_t vocab = 0;         // V >= 2: ids in [0, V), num_classes = V
  int64_t block_size = 0;    // T >= 1: tokens a model reads per sample (samples hold T+1)
  int64_t samples = 0;       // train samples, >= 1
  int64_t test_samples = 0;  // 0: a tenth of `samples`, at least 1
  uint64_t seed = 1;
  int shards = 1;  // shard files of the train split (the test split is one)
  // Samples generated at a time (GeneratedSplit::block_bytes); tests make it
  // small to exercise many appends.
  int64_t block_bytes = int64_t(64) << 20;
};

struct TokenPrepSummary {
  int64_t train_samples = 0, test_samples = 0;
  SampleDType dtype = SampleDType::u16;
  int64_t bytes = 0;  // of all shard files
};

enum class TokenSplit { train, test };

// uint16 for V <= 65536, int32 above (V must fit int32: num_classes does).
SampleDType token_dtype(int64_t vocab);

// The unigram draw's probability of id k (for tests and the loss estimate).
double token_unigram_probability(int64_t vocab, int64_t id);
// Id v's successor in the seed's language.
int64_t token_successor(uint64_t seed, int64_t vocab, int64_t id);

// Window `index` of `split`: `length` ids (T+1) into out.
void synthetic_token_window(uint64_t seed, TokenSplit split, int64_t index, int64_t vocab, int64_t length,
                            int32_t* out);

// Writes out_dir/train (samples windows, `shards` shards) and out_dir/test,
// each with its manifest; /y of a window is its last id. Refuses bad
// options and directories that already hold a data set before writing
// anything. `progress` (may be empty) gets a line per shard and manifest.
TokenPrepSummary prep_tokens(const TokenPrepOptions& options,
                             const std::function<void(const std::string&)>& progress = {});

}  // namespace shardtrain::io
