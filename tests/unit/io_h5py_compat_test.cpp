// Format v1 both ways with h5py, the tool users write their own data with:
// the recipe of docs/formats.md, run by tests/data/make_h5py_dataset.py,
// produces files this loader reads; and files ShardWriter writes read back in
// h5py with the documented attributes and data
// (tests/data/check_shard_with_h5py.py).
#include "io/dataset.h"
#include "io/dataset_writer.h"
#include "io/manifest.h"
#include "io_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

namespace shardtrain::io {
namespace {

using testing::TempDir;

const std::string kPython = "/usr/bin/python3";
const std::string kDataDir = std::string(SHARDTRAIN_SOURCE_DIR) + "/tests/data/";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result run(const std::string& command) {
  Result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

class H5pyCompat : public ::testing::Test {
 protected:
  void SetUp() override {
    // python3-h5py is a dependency (scripts/install-deps.sh): its absence is
    // a broken setup, not a reason to skip.
    const Result probe = run(kPython + " -c 'import h5py, numpy'");
    ASSERT_EQ(probe.exit_code, 0) << kPython
                                  << " cannot import h5py and numpy (install python3-h5py): " << probe.output;
  }
};

TEST_F(H5pyCompat, LoadsTheDocumentedH5pyRecipe) {
  TempDir dir;
  const std::string out = dir / "train";
  const Result r = run(kPython + " " + quoted(kDataDir + "make_h5py_dataset.py") + " " + quoted(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  InMemoryDataset ds = InMemoryDataset::load(out);
  const DatasetInfo& info = ds.info();
  EXPECT_EQ(info.split, "train");
  EXPECT_EQ(info.num_samples, 11);
  EXPECT_EQ(info.shard_files, (std::vector<std::string>{out + "/part-00000.h5", out + "/part-00001.h5"}));
  EXPECT_EQ(info.sample_shape, (Shape{5}));
  EXPECT_EQ(info.dtype, SampleDType::f32);
  EXPECT_EQ(info.num_classes, 3);
  EXPECT_FLOAT_EQ(info.normalize_mean, 1.5f);
  EXPECT_FLOAT_EQ(info.normalize_std, 2.5f);

  // Reversed order: crosses the boundary between the shards (5 + 6).
  std::vector<int64_t> indices;
  for (int64_t i = 10; i >= 0; --i) indices.push_back(i);
  std::vector<float> x(11 * 5);
  std::vector<int32_t> y(11);
  ds.gather(indices.data(), 11, x.data(), y.data());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    EXPECT_EQ(y[k], (7 * i) % 3) << "sample " << i;
    for (int j = 0; j < 5; ++j) {
      const float stored = 0.5f * float(i) - float(j);
      EXPECT_FLOAT_EQ(x[k * 5 + size_t(j)], (stored - 1.5f) / 2.5f) << "sample " << i << " feature " << j;
    }
  }

  // `shardtrain prep manifest` for data written by another tool: a float32
  // split of two shards gets a manifest that it then passes.
  const Manifest m = write_split_manifest(out);
  EXPECT_EQ(m.dtype, SampleDType::f32);
  EXPECT_EQ(m.sample_shape, (Shape{5}));
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[0].num_samples + m.shards[1].num_samples, 11);
  check_manifest_against_files(out, *read_manifest(out));
  for (const ManifestShard& shard : m.shards) verify_shard(out + "/" + shard.file, shard);
  EXPECT_EQ(InMemoryDataset::load(out).size(), 11);
}

TEST_F(H5pyCompat, H5pyReadsWhatShardWriterWrites) {
  TempDir dir;
  const std::string path = dir / "part-00000.h5";
  shard_format::ShardHeader header;
  header.split = "val";
  header.num_classes = 4;
  header.num_samples = 7;
  header.sample_shape = Shape{2, 3};
  header.dtype = SampleDType::u8;
  header.normalize_mean = 0.25f;
  header.normalize_std = 0.5f;
  std::vector<uint8_t> x(7 * 6);
  for (size_t k = 0; k < x.size(); ++k) x[k] = uint8_t((37 * k + 11) % 256);
  std::vector<int32_t> y(7);
  for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t(i % 4);
  write_shard(path, header, x.data(), y.data());

  const Result r = run(kPython + " " + quoted(kDataDir + "check_shard_with_h5py.py") + " " + quoted(path));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace shardtrain::io
