// Format version 2's per-sample checksums (/crc32): the writer stores them,
// the memory loader refuses a sample, a label or a checksum that was changed
// (naming the file, the datasets and the samples), version 1 files still
// load, and `prep upgrade` converts version 1 splits in place, refusing data
// that no longer matches its manifest and finishing an interrupted upgrade.
// The stream loader's check is in tests/mpi/io_stream_loader_test.cpp.
#include "io/dataset.h"
#include "io/dataset_writer.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_handle.h"
#include "io/manifest.h"
#include "io/shard_reader.h"
#include "io/shard_upgrade.h"
#include "io_test_util.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

constexpr int64_t kSamples = 40;
constexpr int64_t kSampleBytes = 12;  // shape [3, 4], uint8

uint8_t value(int64_t sample, int64_t byte) { return uint8_t((sample * 31 + byte * 7 + 3) % 251); }
int32_t label(int64_t sample) { return int32_t(sample % 5); }

shard_format::ShardHeader header(int index, int shards, int64_t samples) {
  shard_format::ShardHeader h;
  h.split = "train";
  h.num_classes = 5;
  h.shard_index = index;
  h.num_shards = shards;
  h.num_samples = samples;
  h.sample_shape = Shape{3, 4};
  return h;
}

// A split of `shards` version 2 shards of kSamples / shards samples each,
// with its manifest.
void write_split(const std::string& dir, int shards) {
  fs::create_directories(dir);
  const int64_t per = kSamples / shards;
  for (int s = 0; s < shards; ++s) {
    std::vector<uint8_t> x(size_t(per * kSampleBytes));
    std::vector<int32_t> y(static_cast<size_t>(per));
    for (int64_t i = 0; i < per; ++i) {
      for (int64_t b = 0; b < kSampleBytes; ++b) x[size_t(i * kSampleBytes + b)] = value(s * per + i, b);
      y[size_t(i)] = label(s * per + i);
    }
    write_shard((fs::path(dir) / shard_format::shard_file_name(s)).string(), header(s, shards, per), x.data(),
                y.data());
  }
  write_split_manifest(dir);
}

// Writes `values` into rows [first, first + count) of the 1-d dataset `name`
// (as `mem_type`), or into one byte of /x's sample `first`.
void overwrite(const std::string& path, const char* name, int64_t first, hid_t mem_type, const void* values,
               int64_t count = 1) {
  h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_GE(file.get(), 0);
  h5::Dataset ds(H5Dopen2(file.get(), name, H5P_DEFAULT));
  h5::Dataspace space(H5Dget_space(ds.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> start(size_t(rank), 0), counts(size_t(rank), 1);
  start[0] = hsize_t(first);
  counts[0] = hsize_t(count);
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr);
  h5::Dataspace mem(H5Screate_simple(rank, counts.data(), nullptr));
  ASSERT_GE(H5Dwrite(ds.get(), mem_type, mem.get(), space.get(), H5P_DEFAULT, values), 0);
}

// Makes the version 2 shard at `path` a version 1 file: no /crc32.
void downgrade(const std::string& path) {
  h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_GE(H5Ldelete(file.get(), shard_format::kChecksums, H5P_DEFAULT), 0);
  ASSERT_GE(H5Adelete(file.get(), shard_format::kAttrVersion), 0);
  h5::write_int_attribute(file.get(), shard_format::kAttrVersion, 1);
}

std::vector<uint8_t> all_bytes(const InMemoryDataset& ds) {
  std::vector<int64_t> idx(size_t(ds.size()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  std::vector<uint8_t> x(idx.size() * size_t(kSampleBytes));
  std::vector<int32_t> y(idx.size());
  ds.gather_bytes(idx.data(), ds.size(), x.data(), y.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], label(int64_t(i)));
  return x;
}

TEST(SampleChecksum, WriterStoresCrcOfSampleThenLabel) {
  TempDir dir;
  write_split(dir.path(), 1);
  const ShardReader reader(dir / "part-00000.h5");
  EXPECT_EQ(reader.header().version, 2);
  const std::vector<uint32_t> crcs = reader.read_checksums();
  ASSERT_EQ(crcs.size(), size_t(kSamples));
  for (int64_t i = 0; i < kSamples; ++i) {
    std::vector<uint8_t> bytes;
    for (int64_t b = 0; b < kSampleBytes; ++b) bytes.push_back(value(i, b));
    const int32_t y = label(i);  // little-endian, as the format says
    uLong crc = crc32(0L, bytes.data(), uInt(bytes.size()));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(&y), 4);
    EXPECT_EQ(crcs[size_t(i)], uint32_t(crc)) << "sample " << i;
  }
}

TEST(SampleChecksum, CleanSplitLoadsVerified) {
  TempDir dir;
  write_split(dir.path(), 2);
  const InMemoryDataset ds = InMemoryDataset::load(dir.path());
  EXPECT_TRUE(ds.info().samples_verified);
  const std::vector<uint8_t> x = all_bytes(ds);
  EXPECT_EQ(x[13], value(1, 1));
}

// Each change is refused with the file, the three datasets and the sample,
// also with the manifest resealed over it (so only /crc32 can tell).
struct Corruption {
  const char* what;
  const char* dataset;
  hid_t mem_type;
  uint32_t value;
};

class SampleChecksumCorruption : public ::testing::TestWithParam<Corruption> {};

TEST_P(SampleChecksumCorruption, RefusedNamingFileDatasetsAndSample) {
  const Corruption& c = GetParam();
  TempDir dir;
  write_split(dir.path(), 2);
  const std::string shard = dir / "part-00001.h5";
  overwrite(shard, c.dataset, 7, c.mem_type, &c.value);
  write_split_manifest(dir.path());  // as if the file had been written so
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {shard + ": sample 7 (of the 20 read) fails its checksum", "/x, /y and /crc32 disagree", "/crc32[7]",
                "The shard is corrupt"});
  // Without verification the same split loads (the user asked for it).
  EXPECT_FALSE(InMemoryDataset::load(dir.path(), 0, false).info().samples_verified);
}

INSTANTIATE_TEST_SUITE_P(Each, SampleChecksumCorruption,
                         ::testing::Values(Corruption{"sample", "/x", H5T_NATIVE_UINT8, 0xff},
                                           Corruption{"label", "/y", H5T_NATIVE_INT32,
                                                      4},  // in range, so only the checksum sees it
                                           Corruption{"checksum", "/crc32", H5T_NATIVE_UINT32, 0x12345678}),
                         [](const auto& test) { return std::string(test.param.what); });

TEST(SampleChecksum, SeveralBadSamplesNamedAsARange) {
  TempDir dir;
  write_split(dir.path(), 1);
  const std::vector<uint8_t> junk(3 * kSampleBytes, 0xee);
  overwrite(dir / "part-00000.h5", "/x", 30, H5T_NATIVE_UINT8, junk.data(), 3);
  write_split_manifest(dir.path());
  expect_error([&] { InMemoryDataset::load(dir.path(), 0, true); },
               {"3 samples in [30, 32] (of the 40 read) fail their checksums"});
}

TEST(SampleChecksum, Version2WithoutChecksumsRefused) {
  TempDir dir;
  write_split(dir.path(), 1);
  {
    h5::File file(H5Fopen((dir / "part-00000.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(file.get(), "/crc32", H5P_DEFAULT), 0);
  }
  fs::remove(dir / "manifest.json");
  expect_error([&] { InMemoryDataset::load(dir.path()); }, {"part-00000.h5", "dataset /crc32 is missing"});
}

TEST(SampleChecksum, Version1LoadsUnverified) {
  TempDir dir;
  write_split(dir.path(), 2);
  downgrade(dir / "part-00000.h5");
  downgrade(dir / "part-00001.h5");
  write_split_manifest(dir.path());
  EXPECT_EQ(read_manifest(dir.path())->format_version, 1);
  const InMemoryDataset ds = InMemoryDataset::load(dir.path());
  EXPECT_FALSE(ds.info().samples_verified);
  EXPECT_TRUE(ds.info().checksums_verified);
  EXPECT_EQ(all_bytes(ds)[5 * kSampleBytes], value(5, 0));
}

TEST(SampleChecksum, MixedVersionsRefused) {
  TempDir dir;
  write_split(dir.path(), 2);
  downgrade(dir / "part-00001.h5");
  fs::remove(dir / "manifest.json");
  expect_error([&] { InMemoryDataset::load(dir.path()); }, {"part-00001.h5", "format_version"});
}

TEST(PrepUpgrade, ConvertsVersion1InPlace) {
  TempDir dir;
  write_split(dir.path(), 2);
  const std::vector<uint8_t> before = all_bytes(InMemoryDataset::load(dir.path()));
  for (const char* f : {"part-00000.h5", "part-00001.h5"}) downgrade(dir / f);
  write_split_manifest(dir.path());

  std::vector<std::string> lines;
  const UpgradeSummary s = upgrade_split(dir.path(), [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(s.upgraded, 2);
  EXPECT_EQ(s.current, 0);
  EXPECT_TRUE(s.had_manifest);
  EXPECT_EQ(s.samples, kSamples);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("version 1 -> 2, 20 samples (checked against the manifest first)"), std::string::npos)
      << lines[0];
  EXPECT_FALSE(fs::exists(dir / "part-00000.h5.tmp"));

  const InMemoryDataset ds = InMemoryDataset::load(dir.path());  // the new manifest matches
  EXPECT_TRUE(ds.info().samples_verified);
  EXPECT_EQ(read_manifest(dir.path())->format_version, 2);
  EXPECT_EQ(all_bytes(ds), before);

  // Again: nothing to convert, every sample checked.
  const UpgradeSummary again = upgrade_split(dir.path());
  EXPECT_EQ(again.upgraded, 0);
  EXPECT_EQ(again.current, 2);
}

TEST(PrepUpgrade, RefusesAShardThatNoLongerMatchesItsManifest) {
  TempDir dir;
  write_split(dir.path(), 2);
  for (const char* f : {"part-00000.h5", "part-00001.h5"}) downgrade(dir / f);
  write_split_manifest(dir.path());
  const uint8_t flipped = 0x5a;
  overwrite(dir / "part-00001.h5", "/x", 3, H5T_NATIVE_UINT8, &flipped);
  expect_error([&] { upgrade_split(dir.path()); },
               {dir / "part-00001.h5", "checksum mismatch", "refusing to add checksums"});
  // The shard before it was converted, the corrupt one left as it was.
  EXPECT_EQ(ShardReader(dir / "part-00000.h5").header().version, 2);
  EXPECT_EQ(ShardReader(dir / "part-00001.h5").header().version, 1);
}

TEST(PrepUpgrade, FinishesAnInterruptedUpgrade) {
  TempDir dir;
  write_split(dir.path(), 2);
  for (const char* f : {"part-00000.h5", "part-00001.h5"}) downgrade(dir / f);
  write_split_manifest(dir.path());
  const Manifest v1 = *read_manifest(dir.path());
  fs::copy_file(dir / "part-00001.h5", dir / "v1-shard-1");
  upgrade_split(dir.path());
  // As if the upgrade had stopped after the first shard: shard 1 and the
  // manifest as they were, so the manifest's entry for shard 0 is stale.
  fs::copy_file(dir / "v1-shard-1", dir / "part-00001.h5", fs::copy_options::overwrite_existing);
  write_manifest(dir.path(), v1);

  const UpgradeSummary s = upgrade_split(dir.path());
  EXPECT_EQ(s.current, 1);
  EXPECT_EQ(s.upgraded, 1);
  EXPECT_TRUE(InMemoryDataset::load(dir.path()).info().samples_verified);

  // A converted shard whose manifest entry is stale and which is corrupt is
  // found by its own checksums.
  write_manifest(dir.path(), v1);
  const uint8_t flipped = 0x11;
  overwrite(dir / "part-00000.h5", "/x", 2, H5T_NATIVE_UINT8, &flipped);
  expect_error([&] { upgrade_split(dir.path()); }, {dir / "part-00000.h5", "sample 2 (of the 20 read)"});
}

TEST(PrepUpgrade, WithoutManifestStillConverts) {
  TempDir dir;
  write_split(dir.path(), 1);
  downgrade(dir / "part-00000.h5");
  fs::remove(dir / "manifest.json");
  const UpgradeSummary s = upgrade_split(dir.path());
  EXPECT_FALSE(s.had_manifest);
  EXPECT_EQ(s.upgraded, 1);
  EXPECT_TRUE(fs::exists(dir / "manifest.json"));
}

}  // namespace
}  // namespace shardtrain::io
