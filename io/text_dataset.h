// `shardtrain prep text`: a byte-level language-model data set from a text
// corpus (by default the King James Bible of Debian's bible-kjv package).
//
// The text is cut into non-overlapping windows of T+1 bytes (token ids
// 0..255); each window is one uint8 sample of shape [T+1]: a model reads its
// first T bytes and predicts the next byte at every position (docs/formats.md,
// "Text (language-model) data"). The label /y of a window is its last byte
// (the files stay valid format v1 classification splits, num_classes = 256).
// The last windows of the text are the test split.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardtrain::io {

struct TextPrepOptions {
  std::string out_dir;                                // gets train/ and test/ split directories
  std::string input;                                  // a text file; empty: the output of `command`
  std::string command = "bible \"Gen1:1-Rev22:21\"";  // the default corpus (package bible-kjv)
  int64_t block_size = 64;                            // T: tokens a model reads per sample (samples hold T+1 bytes)
  double test_fraction = 0.1;                         // of the windows, from the end of the text
};

struct TextPrepSummary {
  int64_t corpus_bytes = 0, train_samples = 0, test_samples = 0;
};

constexpr int32_t kByteVocabulary = 256;

// The whole corpus: the file, or the command's standard output (an Error if
// it cannot run or exits non-zero, naming it).
std::vector<uint8_t> read_text_corpus(const TextPrepOptions& options);

// Windows of T+1 bytes cut from `text` (non-overlapping, the remainder
// dropped): [num_windows, T+1] row-major, and their count.
int64_t text_windows(const std::vector<uint8_t>& text, int64_t block_size, std::vector<uint8_t>* windows);

// Reads the corpus, writes out_dir/train and out_dir/test (one shard each,
// with manifest.json; earlier shards there are replaced).
TextPrepSummary prep_text(const TextPrepOptions& options, const std::function<void(const std::string&)>& progress = {});

}  // namespace shardtrain::io
