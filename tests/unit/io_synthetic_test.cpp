// prep_synthetic: the shards and manifest it writes load back with exactly
// the bytes and labels synthetic_sample/synthetic_label promise, whatever the
// shard count and block size; bad options are Errors that say which.
#include "io/dataset.h"
#include "io/manifest.h"
#include "io/shard_reader.h"
#include "io/synthetic.h"
#include "io_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

SyntheticOptions small(const std::string& out, int shards = 4) {
  SyntheticOptions o;
  o.out_dir = out;
  o.samples = 103;
  o.sample_bytes = 37;  // not a multiple of 8: the last word is partial
  o.shards = shards;
  o.num_classes = 7;
  o.seed = 5;
  return o;
}

// Every sample's raw bytes, in order, read shard by shard.
std::vector<uint8_t> raw_samples(const std::string& dir) {
  std::vector<uint8_t> all;
  for (const std::string& file : shard_format::list_shard_files(dir)) {
    ShardReader reader(file);
    const shard_format::ShardHeader& h = reader.header();
    std::vector<uint8_t> x(size_t(h.num_samples * h.sample_shape.numel()));
    reader.read_x(0, h.num_samples, x.data());
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

std::vector<uint8_t> expected_samples(uint64_t seed, int64_t n, int64_t bytes) {
  std::vector<uint8_t> x(size_t(n * bytes));
  for (int64_t i = 0; i < n; ++i) synthetic_sample(seed, i, bytes, x.data() + i * bytes);
  return x;
}

TEST(Synthetic, WritesShardsAndManifest) {
  TempDir dir;
  const std::string out = dir / "train";
  std::vector<std::string> lines;
  const Manifest m = prep_synthetic(small(out), [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(lines.size(), 5u);  // a line per shard, one for the manifest

  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "part-00000.h5", "part-00001.h5", "part-00002.h5",
                                             "part-00003.h5"}));

  // 103 in 4: [0, 25), [25, 51), [51, 77), [77, 103).
  const std::optional<Manifest> back = read_manifest(out);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->num_samples, 103);
  EXPECT_EQ(back->sample_shape, (Shape{37}));
  EXPECT_EQ(back->dtype, SampleDType::u8);
  EXPECT_EQ(back->num_classes, 7);
  EXPECT_EQ(back->split, "train");
  ASSERT_EQ(back->shards.size(), 4u);
  const std::vector<int64_t> sizes{25, 26, 26, 26};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(back->shards[i].num_samples, sizes[i]);
    EXPECT_EQ(back->shards[i].crc32, m.shards[i].crc32);
    verify_shard((fs::path(out) / back->shards[i].file).string(), back->shards[i]);
  }
  check_manifest_against_files(out, *back);
  EXPECT_EQ(build_manifest(out).shards[3].crc32, m.shards[3].crc32);

  // Loads as a split; pixels are x / 255, labels are synthetic_label's.
  const InMemoryDataset ds = InMemoryDataset::load(out);
  EXPECT_EQ(ds.size(), 103);
  EXPECT_EQ(ds.info().sample_shape, (Shape{37}));
  std::vector<int64_t> indices(103);
  std::iota(indices.begin(), indices.end(), 0);
  std::vector<float> x(103 * 37);
  std::vector<int32_t> y(103);
  ds.gather(indices.data(), 103, x.data(), y.data());
  const std::vector<uint8_t> want = expected_samples(5, 103, 37);
  for (size_t k = 0; k < want.size(); ++k) ASSERT_FLOAT_EQ(x[k], float(want[k]) / 255.0f) << k;
  std::vector<int> per_class(7, 0);
  for (int64_t i = 0; i < 103; ++i) {
    ASSERT_EQ(y[size_t(i)], synthetic_label(5, i, 7));
    ASSERT_GE(y[size_t(i)], 0);
    ASSERT_LT(y[size_t(i)], 7);
    ++per_class[size_t(y[size_t(i)])];
  }
  for (int c = 0; c < 7; ++c) EXPECT_GT(per_class[size_t(c)], 3) << "class " << c;  // about 15 each
  EXPECT_EQ(raw_samples(out), want);
}

TEST(Synthetic, SameSeedSameDataWhateverTheShardsAndBlocks) {
  TempDir dir;
  SyntheticOptions a = small(dir / "a", 1);
  SyntheticOptions b = small(dir / "b", 7);
  b.block_bytes = 100;  // a few samples per append: many appends, partial last ones
  SyntheticOptions c = small(dir / "c", 3);
  c.seed = 6;
  prep_synthetic(a);
  prep_synthetic(b);
  prep_synthetic(c);
  EXPECT_EQ(raw_samples(a.out_dir), raw_samples(b.out_dir));
  EXPECT_NE(raw_samples(a.out_dir), raw_samples(c.out_dir));
  EXPECT_EQ(raw_samples(a.out_dir), expected_samples(5, 103, 37));
  EXPECT_EQ(InMemoryDataset::load(b.out_dir).size(), 103);
  // The data is not trivially repetitive: samples differ from each other.
  std::vector<uint8_t> s0(37), s1(37);
  synthetic_sample(5, 0, 37, s0.data());
  synthetic_sample(5, 1, 37, s1.data());
  EXPECT_NE(s0, s1);
}

TEST(Synthetic, ShardLargerThanABlock) {
  // 3 MiB in one shard with 1 MiB blocks: whole-chunk appends, then a partial one.
  TempDir dir;
  SyntheticOptions o;
  o.out_dir = dir / "big";
  o.samples = 3000;
  o.sample_bytes = 1000;
  o.block_bytes = int64_t(1) << 20;
  o.num_classes = 2;
  prep_synthetic(o);
  EXPECT_EQ(raw_samples(o.out_dir), expected_samples(1, 3000, 1000));
}

TEST(Synthetic, OneSampleShards) {
  TempDir dir;
  SyntheticOptions o;
  o.out_dir = dir / "one";
  o.samples = 3;
  o.sample_bytes = 1;
  o.shards = 3;
  o.num_classes = 1;
  const Manifest m = prep_synthetic(o);
  EXPECT_EQ(m.shards.size(), 3u);
  EXPECT_EQ(InMemoryDataset::load(o.out_dir).size(), 3);
  EXPECT_EQ(synthetic_label(1, 2, 1), 0);
}

TEST(Synthetic, BadOptions) {
  TempDir dir;
  auto with = [&](auto change) {
    SyntheticOptions o = small(dir / "x");
    change(o);
    return o;
  };
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.samples = 0; })); }, {"samples is 0"});
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.sample_bytes = 0; })); }, {"sample bytes is 0"});
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.shards = 0; })); }, {"shards is 0"});
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.shards = 104; })); },
               {"shards is 104 but there are only 103 samples"});
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.num_classes = 0; })); }, {"classes is 0"});
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.out_dir = ""; })); }, {"--out"});
  expect_error([&] { prep_synthetic(with([](SyntheticOptions& o) { o.sample_bytes = int64_t(1) << 50; })); },
               {"GB are free"});
  EXPECT_TRUE(fs::is_empty(dir.path())) << "nothing may be written when the options are invalid";

  // An existing data set is not overwritten or mixed with.
  prep_synthetic(small(dir / "x"));
  expect_error([&] { prep_synthetic(small(dir / "x", 2)); }, {dir / "x", "already holds a data set"});
  EXPECT_EQ(read_manifest(dir / "x")->shards.size(), 4u);
  testing::write_bytes(dir / "file", {1});
  expect_error([&] { prep_synthetic(small(dir / "file")); }, {dir / "file", "not a directory"});
  // An empty or unrelated directory is fine.
  fs::create_directories(dir / "empty");
  testing::write_bytes(dir / "empty/README", {1});
  prep_synthetic(small(dir / "empty"));
}

}  // namespace
}  // namespace shardtrain::io
