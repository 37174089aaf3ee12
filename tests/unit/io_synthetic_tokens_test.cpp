// prep_tokens: language-model windows of any vocabulary, a function of the
// seed alone (not of shards or blocks), ids in [0, V), stored as uint16 up to
// V = 65536 and int32 above; the train and test splits have the sizes asked
// for and load back as the generator promises; the windows follow the
// documented rule; bad options are Errors that say which, before anything
// is written.
#include "io/dataset.h"
#include "io/manifest.h"
#include "io/shard_format.h"
#include "io/synthetic_tokens.h"
#include "io_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

TokenPrepOptions small(const std::string& out, int64_t vocab = 1000, int shards = 3) {
  TokenPrepOptions o;
  o.out_dir = out;
  o.vocab = vocab;
  o.block_size = 12;
  o.samples = 50;
  o.test_samples = 7;
  o.seed = 9;
  o.shards = shards;
  return o;
}

// Every window of a split as int32 ids, read back through the in-memory
// loader (so the stored dtype, checksums and manifest are checked too), and
// the labels.
std::vector<int32_t> load_ids(const std::string& split_dir, std::vector<int32_t>* labels = nullptr) {
  const InMemoryDataset ds = InMemoryDataset::load(split_dir);
  std::vector<int64_t> idx(size_t(ds.size()));
  std::iota(idx.begin(), idx.end(), 0);
  const size_t numel = size_t(ds.size() * ds.info().sample_numel());
  std::vector<uint8_t> raw(numel * shard_format::dtype_size(ds.info().dtype));
  std::vector<int32_t> y(idx.size());
  ds.gather_bytes(idx.data(), ds.size(), raw.data(), y.data());
  std::vector<int32_t> ids(numel);
  for (size_t k = 0; k < numel; ++k) {
    if (ds.info().dtype == SampleDType::u16) {
      uint16_t v;
      std::memcpy(&v, raw.data() + 2 * k, 2);
      ids[k] = v;
    } else {
      std::memcpy(&ids[k], raw.data() + 4 * k, 4);
    }
  }
  if (labels) *labels = y;
  return ids;
}

std::vector<int32_t> expected_ids(const TokenPrepOptions& o, TokenSplit split, int64_t n) {
  const int64_t length = o.block_size + 1;
  std::vector<int32_t> ids(size_t(n * length));
  for (int64_t i = 0; i < n; ++i) synthetic_token_window(o.seed, split, i, o.vocab, length, ids.data() + i * length);
  return ids;
}

TEST(SyntheticTokens, WritesTrainAndTestSplits) {
  TempDir dir;
  const TokenPrepOptions o = small(dir / "tok");
  std::vector<std::string> lines;
  const TokenPrepSummary s = prep_tokens(o, [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(lines.size(), 6u);  // 3 train shards + manifest, 1 test shard + manifest
  EXPECT_EQ(s.train_samples, 50);
  EXPECT_EQ(s.test_samples, 7);
  EXPECT_EQ(s.dtype, SampleDType::u16);
  EXPECT_GT(s.bytes, 0);

  for (const auto& [name, n, shards] : {std::tuple{"train", 50, 3}, std::tuple{"test", 7, 1}}) {
    const std::optional<Manifest> m = read_manifest(dir / ("tok/" + std::string(name)));
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_EQ(m->split, name);
    EXPECT_EQ(m->num_samples, n);
    EXPECT_EQ(m->shards.size(), size_t(shards));
    EXPECT_EQ(m->num_classes, 1000);
    EXPECT_EQ(m->sample_shape, Shape{13});
    EXPECT_EQ(m->dtype, SampleDType::u16);
  }
  std::vector<int32_t> labels;
  const std::vector<int32_t> train = load_ids(dir / "tok/train", &labels);
  EXPECT_EQ(train, expected_ids(o, TokenSplit::train, 50));
  for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(labels[i], train[i * 13 + 12]) << "/y is the last id";
  const std::vector<int32_t> test = load_ids(dir / "tok/test");
  EXPECT_EQ(test, expected_ids(o, TokenSplit::test, 7));
  EXPECT_NE(std::vector<int32_t>(test.begin(), test.begin() + 13),
            std::vector<int32_t>(train.begin(), train.begin() + 13))
      << "the splits draw from streams of their own";
  for (int32_t id : train) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 1000);
  }
}

TEST(SyntheticTokens, SameSeedSameDataWhateverTheShardsAndBlocks) {
  TempDir dir;
  TokenPrepOptions a = small(dir / "a", 1000, 1);
  TokenPrepOptions b = small(dir / "b", 1000, 7);
  b.block_bytes = 60;  // two samples of 26 bytes per append: many appends, partial last ones
  TokenPrepOptions c = small(dir / "c", 1000, 3);
  c.seed = 10;
  prep_tokens(a);
  prep_tokens(b);
  prep_tokens(c);
  EXPECT_EQ(load_ids(a.out_dir + "/train"), load_ids(b.out_dir + "/train"));
  EXPECT_EQ(load_ids(a.out_dir + "/test"), load_ids(b.out_dir + "/test"));
  EXPECT_NE(load_ids(a.out_dir + "/train"), load_ids(c.out_dir + "/train"));
  // The generator alone is deterministic too.
  std::vector<int32_t> w1(13), w2(13);
  synthetic_token_window(9, TokenSplit::train, 4, 1000, 13, w1.data());
  synthetic_token_window(9, TokenSplit::train, 4, 1000, 13, w2.data());
  EXPECT_EQ(w1, w2);
}

TEST(SyntheticTokens, DtypeFollowsTheVocabulary) {
  EXPECT_EQ(token_dtype(2), SampleDType::u16);
  EXPECT_EQ(token_dtype(50257), SampleDType::u16);
  EXPECT_EQ(token_dtype(65536), SampleDType::u16);
  EXPECT_EQ(token_dtype(65537), SampleDType::i32);

  // At the edges: ids up to 65535 in uint16, beyond it int32.
  TempDir dir;
  for (int64_t vocab : {int64_t(2), int64_t(65536), int64_t(70000)}) {
    TokenPrepOptions o = small(dir / fmt::format("v{}", vocab), vocab, 2);
    o.samples = 400;  // enough draws to reach the top octave
    const TokenPrepSummary s = prep_tokens(o);
    EXPECT_EQ(s.dtype, token_dtype(vocab));
    EXPECT_EQ(read_manifest(o.out_dir + "/train")->num_classes, vocab);
    const std::vector<int32_t> ids = load_ids(o.out_dir + "/train");
    EXPECT_EQ(ids, expected_ids(o, TokenSplit::train, 400)) << vocab;
    const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
    EXPECT_EQ(*lo, 0) << vocab;  // id 0 is the most frequent draw
    EXPECT_LT(*hi, vocab);
    EXPECT_GE(*hi, vocab / 2) << vocab;  // the whole range is used
    if (vocab > 65536) {
      EXPECT_GT(*hi, 65535) << "ids beyond uint16 survive int32 storage";
    }
  }
}

TEST(SyntheticTokens, WindowsFollowTheDocumentedRule) {
  // The unigram draw is a distribution over [0, V), Zipf-like: id 0 has
  // 1/L (L = bit_width(V) octaves), id k about 1 / (L (k + 1)).
  for (int64_t vocab : {int64_t(2), int64_t(3), int64_t(1000), int64_t(50257)}) {
    double sum = 0;
    for (int64_t k = 0; k < vocab; ++k) sum += token_unigram_probability(vocab, k);
    EXPECT_NEAR(sum, 1.0, 1e-9) << vocab;
  }
  EXPECT_DOUBLE_EQ(token_unigram_probability(50257, 0), 1.0 / 16);
  EXPECT_DOUBLE_EQ(token_unigram_probability(50257, 1), 1.0 / 32);
  EXPECT_DOUBLE_EQ(token_unigram_probability(50257, 50256), 1.0 / 16 / (50257 - 32767));

  // About 3/4 of the next ids (plus the unigram's own hits) are the
  // successor of the one before; the first ids follow the unigram draw.
  const int64_t vocab = 50257, length = 65, n = 2000;
  std::vector<int32_t> w(length);
  int64_t follows = 0, firsts_zero = 0;
  for (int64_t i = 0; i < n; ++i) {
    synthetic_token_window(3, TokenSplit::train, i, vocab, length, w.data());
    firsts_zero += w[0] == 0;
    for (int64_t t = 1; t < length; ++t) follows += w[size_t(t)] == token_successor(3, vocab, w[size_t(t - 1)]);
  }
  const double rate = double(follows) / double(n * (length - 1));
  EXPECT_NEAR(rate, 0.75, 0.01);
  EXPECT_NEAR(double(firsts_zero) / double(n), 1.0 / 16, 0.015);
  // The successor table is fixed by the seed, and differs between seeds.
  EXPECT_EQ(token_successor(3, vocab, 17), token_successor(3, vocab, 17));
  int64_t same = 0;
  for (int64_t v = 0; v < 100; ++v) same += token_successor(3, vocab, v) == token_successor(4, vocab, v);
  EXPECT_LT(same, 3);
}

TEST(SyntheticTokens, DefaultTestSplitIsATenth) {
  TempDir dir;
  TokenPrepOptions o = small(dir / "a", 300, 1);
  o.test_samples = 0;
  o.samples = 45;
  EXPECT_EQ(prep_tokens(o).test_samples, 4);
  o.out_dir = dir / "b";
  o.samples = 5;
  EXPECT_EQ(prep_tokens(o).test_samples, 1);  // at least one
  EXPECT_EQ(InMemoryDataset::load(dir / "b/test").size(), 1);
}

TEST(SyntheticTokens, BadOptions) {
  TempDir dir;
  auto with = [&](auto change) {
    TokenPrepOptions o = small(dir / "x");
    change(o);
    return o;
  };
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.vocab = 1; })); }, {"vocabulary is 1"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.vocab = int64_t(1) << 31; })); },
               {"vocabulary is 2147483648", "int32"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.block_size = 0; })); }, {"block size is 0"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.samples = 0; })); }, {"samples is 0"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.test_samples = -1; })); }, {"test samples is -1"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.shards = 0; })); }, {"shards is 0"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.shards = 51; })); },
               {"shards is 51 but there are only 50 samples"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.out_dir = ""; })); }, {"--out"});
  expect_error([&] { prep_tokens(with([](TokenPrepOptions& o) { o.samples = int64_t(1) << 40; })); }, {"GB are free"});
  EXPECT_TRUE(fs::is_empty(dir.path())) << "nothing may be written when the options are invalid";

  // An existing data set in either split is neither overwritten nor mixed
  // with, and nothing is written.
  fs::create_directories(dir / "x/test");
  testing::write_bytes(dir / "x/test/manifest.json", {'{', '}'});
  expect_error([&] { prep_tokens(small(dir / "x")); }, {dir / "x/test", "already holds a data set"});
  EXPECT_FALSE(fs::exists(dir / "x/train"));
}

}  // namespace
}  // namespace shardtrain::io
