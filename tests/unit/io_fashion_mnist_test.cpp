// prep_fashion_mnist end to end: synthetic idx.gz files with known pixels go
// through the converter and come back out of InMemoryDataset exactly; bad
// inputs are Errors naming the file; the real data set converts completely.
#include "io/dataset.h"
#include "io/fashion_mnist.h"
#include "io/idx_reader.h"
#include "io/manifest.h"
#include "io/shard_format.h"
#include "io_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <random>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::idx_bytes;
using testing::TempDir;
using testing::write_gz;

constexpr float kMean = 0.2860f, kStd = 0.3530f;
constexpr int kPixels = 28 * 28;

uint8_t pixel(int split_seed, int64_t sample, int p) { return uint8_t((sample * 13 + p * 7 + split_seed) % 256); }
uint8_t label(int split_seed, int64_t sample) { return uint8_t((sample * (split_seed + 1) + split_seed) % 10); }

// Writes <prefix>-{images-idx3,labels-idx1}-ubyte.gz for n samples.
void write_source(const TempDir& dir, const std::string& prefix, int split_seed, uint32_t n) {
  std::vector<uint8_t> images(size_t(n) * kPixels), labels(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (int p = 0; p < kPixels; ++p) images[size_t(i) * kPixels + size_t(p)] = pixel(split_seed, i, p);
    labels[i] = label(split_seed, i);
  }
  write_gz(dir / (prefix + "-images-idx3-ubyte.gz"), idx_bytes(kIdxImagesMagic, {n, 28, 28}, images));
  write_gz(dir / (prefix + "-labels-idx1-ubyte.gz"), idx_bytes(kIdxLabelsMagic, {n}, labels));
}

struct Source {
  TempDir dir;
  Source() {
    write_source(dir, "train", 0, 50);
    write_source(dir, "t10k", 1, 20);
  }
};

FashionMnistPrepOptions options(const Source& src, const TempDir& out, int shards) {
  FashionMnistPrepOptions o;
  o.source_dir = src.dir.path();
  o.out_dir = out.path();
  o.shards = shards;
  return o;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Gathers `indices` from ds and checks every normalized pixel and label.
void expect_samples(const InMemoryDataset& ds, int split_seed, const std::vector<int64_t>& indices) {
  std::vector<float> x(indices.size() * kPixels);
  std::vector<int32_t> y(indices.size());
  ds.gather(indices.data(), int64_t(indices.size()), x.data(), y.data());
  for (size_t i = 0; i < indices.size(); ++i) {
    ASSERT_EQ(y[i], label(split_seed, indices[i])) << "sample " << indices[i];
    for (int p = 0; p < kPixels; ++p) {
      const double want = (pixel(split_seed, indices[i], p) / 255.0 - kMean) / kStd;
      ASSERT_NEAR(x[i * kPixels + size_t(p)], want, 1e-5) << "sample " << indices[i] << " pixel " << p;
    }
  }
}

std::vector<int64_t> shuffled(int64_t n, unsigned seed) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
  return idx;
}

class FashionMnistRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(FashionMnistRoundTrip, LoadsBackExactly) {
  const int shards = GetParam();
  Source src;
  TempDir out;
  std::vector<std::string> lines;
  PrepSummary summary =
      prep_fashion_mnist(options(src, out, shards), [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(summary.train_samples, 50);
  EXPECT_EQ(summary.test_samples, 20);
  EXPECT_EQ(summary.shards, shards);
  EXPECT_EQ(lines.size(), size_t(2 * (shards + 1)));  // a line per shard and per manifest

  struct Expect {
    const char* split;
    int seed;
    int64_t n;
  };
  for (const Expect& e : {Expect{"train", 0, 50}, Expect{"test", 1, 20}}) {
    SCOPED_TRACE(e.split);
    const std::string dir = out / e.split;
    std::vector<std::string> want_files;
    for (int s = 0; s < shards; ++s) want_files.push_back(shard_format::shard_file_name(s));
    std::vector<std::string> with_manifest{kManifestFile};
    with_manifest.insert(with_manifest.end(), want_files.begin(), want_files.end());
    EXPECT_EQ(files_in(dir), with_manifest);
    // The manifest describes the files just written.
    const std::optional<Manifest> manifest = read_manifest(dir);
    ASSERT_TRUE(manifest.has_value());
    EXPECT_EQ(manifest->num_samples, e.n);
    EXPECT_EQ(manifest->shards.size(), size_t(shards));
    check_manifest_against_files(dir, *manifest);

    InMemoryDataset ds = InMemoryDataset::load(dir);
    const DatasetInfo& info = ds.info();
    EXPECT_EQ(info.path, dir);
    EXPECT_EQ(info.split, e.split);
    EXPECT_EQ(info.num_samples, e.n);
    EXPECT_EQ(ds.size(), e.n);
    EXPECT_EQ(info.sample_shape, (Shape{1, 28, 28}));
    EXPECT_EQ(info.dtype, SampleDType::u8);
    EXPECT_EQ(info.num_classes, 10);
    EXPECT_FLOAT_EQ(info.normalize_mean, kMean);
    EXPECT_FLOAT_EQ(info.normalize_std, kStd);
    ASSERT_EQ(info.shard_files.size(), size_t(shards));
    for (int s = 0; s < shards; ++s)
      EXPECT_EQ(info.shard_files[size_t(s)], (fs::path(dir) / want_files[size_t(s)]).string());

    // Every sample, in shuffled order: with 3 shards the order crosses the
    // shard boundaries (50 = 16 + 17 + 17, 20 = 6 + 7 + 7) many times.
    expect_samples(ds, e.seed, shuffled(e.n, 42));
    // Repeated indices are fine (sampling with replacement).
    expect_samples(ds, e.seed, {e.n - 1, 0, e.n - 1, 15, 16, 17});
  }

  // A limit keeps the first samples, across shard boundaries.
  InMemoryDataset limited = InMemoryDataset::load(out / "train", 20);
  EXPECT_EQ(limited.size(), 20);
  expect_samples(limited, 0, shuffled(20, 7));
  std::vector<float> x(kPixels);
  int32_t y = 0;
  int64_t beyond = 20;
  expect_error([&] { limited.gather(&beyond, 1, x.data(), &y); }, {"sample index 20 is out of range [0, 20)"});
  // A limit past the end is the whole split.
  EXPECT_EQ(InMemoryDataset::load(out / "train", 1000).size(), 50);
  // A single shard file is a valid path when it is a one-shard split.
  if (shards == 1) {
    EXPECT_EQ(InMemoryDataset::load(out / "test/part-00000.h5").size(), 20);
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, FashionMnistRoundTrip, ::testing::Values(1, 3));

TEST(FashionMnistPrep, RerunWithFewerShardsRemovesStaleFiles) {
  Source src;
  TempDir out;
  prep_fashion_mnist(options(src, out, 3));
  testing::write_bytes(out / "train/part-00007.h5.tmp", {1, 2, 3});  // an interrupted write
  testing::write_bytes(out / "train/notes.txt", {1});                // not ours: kept
  prep_fashion_mnist(options(src, out, 2));
  EXPECT_EQ(files_in(out / "train"),
            (std::vector<std::string>{"manifest.json", "notes.txt", "part-00000.h5", "part-00001.h5"}));
  EXPECT_EQ(files_in(out / "test"), (std::vector<std::string>{"manifest.json", "part-00000.h5", "part-00001.h5"}));
  EXPECT_EQ(read_manifest(out / "train")->shards.size(), 2u);
  EXPECT_EQ(InMemoryDataset::load(out / "train").size(), 50);
}

TEST(FashionMnistPrep, ShardCountMustFitTheSamples) {
  Source src;
  TempDir out;
  expect_error([&] { prep_fashion_mnist(options(src, out, 0)); }, {"shards is 0", ">= 1"});
  expect_error([&] { prep_fashion_mnist(options(src, out, 21)); }, {"shards is 21", "test split has only 20"});
  EXPECT_TRUE(fs::is_empty(out.path())) << "nothing may be written when the options are invalid";
}

TEST(FashionMnistPrep, ImageLabelCountMismatch) {
  Source src;
  write_source(src.dir, "t10k", 1, 20);
  std::vector<uint8_t> labels(19, 1);
  write_gz(src.dir / "t10k-labels-idx1-ubyte.gz", idx_bytes(kIdxLabelsMagic, {19}, labels));
  TempDir out;
  expect_error([&] { prep_fashion_mnist(options(src, out, 1)); }, {src.dir / "t10k-images-idx3-ubyte.gz", "20 images",
                                                                   src.dir / "t10k-labels-idx1-ubyte.gz", "19 labels"});
  // The train split was fine, but nothing is written when any input is bad.
  EXPECT_TRUE(fs::is_empty(out.path()));
}

TEST(FashionMnistPrep, WrongImageDimensions) {
  Source src;
  write_gz(src.dir / "train-images-idx3-ubyte.gz",
           idx_bytes(kIdxImagesMagic, {50, 28, 27}, std::vector<uint8_t>(50 * 28 * 27, 0)));
  TempDir out;
  expect_error([&] { prep_fashion_mnist(options(src, out, 1)); },
               {src.dir / "train-images-idx3-ubyte.gz", "28x27", "28x28"});
}

TEST(FashionMnistPrep, LabelOutOfRange) {
  Source src;
  std::vector<uint8_t> labels(50, 3);
  labels[5] = 10;
  write_gz(src.dir / "train-labels-idx1-ubyte.gz", idx_bytes(kIdxLabelsMagic, {50}, labels));
  TempDir out;
  expect_error([&] { prep_fashion_mnist(options(src, out, 1)); },
               {src.dir / "train-labels-idx1-ubyte.gz", "label 10 of sample 5"});
}

TEST(FashionMnistPrep, MissingSourceFile) {
  Source src;
  fs::remove(src.dir / "t10k-labels-idx1-ubyte.gz");
  TempDir out;
  expect_error([&] { prep_fashion_mnist(options(src, out, 1)); },
               {src.dir / "t10k-labels-idx1-ubyte.gz", "no such file"});
}

TEST(FashionMnistPrep, CorruptSourceFile) {
  Source src;
  std::vector<uint8_t> images(20 * kPixels + 3, 0);  // 3 bytes too many
  write_gz(src.dir / "t10k-images-idx3-ubyte.gz", idx_bytes(kIdxImagesMagic, {20, 28, 28}, images));
  TempDir out;
  expect_error([&] { prep_fashion_mnist(options(src, out, 1)); },
               {src.dir / "t10k-images-idx3-ubyte.gz", "3 bytes of trailing garbage"});
}

// The real data set from Debian's dataset-fashion-mnist package.
TEST(FashionMnistPrep, RealDataSet) {
  const std::string source = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(source)) GTEST_SKIP() << source << " not installed (package dataset-fashion-mnist)";
  TempDir out;
  FashionMnistPrepOptions o;
  o.source_dir = source;
  o.out_dir = out.path();
  o.shards = 4;
  const auto start = std::chrono::steady_clock::now();
  PrepSummary summary = prep_fashion_mnist(o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "prep_fashion_mnist (4 shards): " << seconds << " s\n";
  RecordProperty("prep_seconds", std::to_string(seconds));
  EXPECT_EQ(summary.train_samples, 60000);
  EXPECT_EQ(summary.test_samples, 10000);

  struct Expect {
    const char* split;
    int64_t n;
  };
  for (const Expect& e : {Expect{"train", 60000}, Expect{"test", 10000}}) {
    InMemoryDataset ds = InMemoryDataset::load(out / e.split);
    EXPECT_EQ(ds.size(), e.n);
    EXPECT_EQ(ds.info().shard_files.size(), 4u);
    EXPECT_EQ(ds.info().sample_shape, (Shape{1, 28, 28}));
    std::vector<int64_t> all(size_t(e.n));
    std::iota(all.begin(), all.end(), 0);
    std::vector<float> x(size_t(e.n) * kPixels);
    std::vector<int32_t> y(size_t(e.n));
    ds.gather(all.data(), e.n, x.data(), y.data());
    std::vector<int64_t> histogram(10, 0);
    for (int32_t label_value : y) histogram[size_t(label_value)]++;
    EXPECT_EQ(histogram, std::vector<int64_t>(10, e.n / 10)) << e.split;
    // The normalization is the one the data was measured with: over the
    // training split the normalized pixels have mean ~0 and std ~1.
    if (e.n == 60000) {
      double sum = 0, sum_sq = 0;
      for (float v : x) sum += v, sum_sq += double(v) * v;
      const double mean = sum / double(x.size());
      EXPECT_NEAR(mean, 0.0, 1e-3);
      EXPECT_NEAR(std::sqrt(sum_sq / double(x.size()) - mean * mean), 1.0, 1e-3);
    }
  }
}

}  // namespace
}  // namespace shardtrain::io
