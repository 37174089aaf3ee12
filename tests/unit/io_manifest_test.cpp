// manifest.json: built from a split, written and read back unchanged; every
// way a split can disagree with its manifest (a shard missing, added,
// truncated, grown, rewritten with other samples, shape, dtype, classes) and
// every malformed manifest is an Error naming the shard or the manifest; a
// flipped byte fails verify_shard.
#include "io/dataset.h"
#include "io/dataset_writer.h"
#include "io/manifest.h"
#include "io_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <filesystem>
#include <fstream>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_error;
using testing::TempDir;

constexpr int32_t kClasses = 5;

// A split of `sizes[i]` samples per shard, uint8 [2, 3], labels i % 5.
std::string write_split(const TempDir& dir, const std::vector<int64_t>& sizes, const std::string& name = "train") {
  const std::string split_dir = dir / name;
  fs::create_directories(split_dir);
  int64_t next = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    shard_format::ShardHeader h;
    h.split = name;
    h.num_classes = kClasses;
    h.shard_index = int32_t(s);
    h.num_shards = int32_t(sizes.size());
    h.num_samples = sizes[s];
    h.sample_shape = Shape{2, 3};
    std::vector<uint8_t> x(size_t(sizes[s] * 6));
    std::vector<int32_t> y(static_cast<size_t>(sizes[s]));
    for (size_t i = 0; i < x.size(); ++i) x[i] = uint8_t(next * 6 + int64_t(i));
    for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((next + int64_t(i)) % kClasses);
    write_shard((fs::path(split_dir) / shard_format::shard_file_name(int(s))).string(), h, x.data(), y.data());
    next += sizes[s];
  }
  return split_dir;
}

std::string shard_path(const std::string& split_dir, int i) {
  return (fs::path(split_dir) / shard_format::shard_file_name(i)).string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }
void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Manifest, Crc32OfKnownData) {
  TempDir dir;
  testing::write_bytes(dir / "check", {'1', '2', '3', '4', '5', '6', '7', '8', '9'});
  EXPECT_EQ(file_crc32(dir / "check"), 0xcbf43926u);  // the CRC-32 check value
  testing::write_bytes(dir / "empty", {});
  EXPECT_EQ(file_crc32(dir / "empty"), 0u);
  // Several 4 MiB blocks and a partial one: the same as one pass over it all.
  std::vector<uint8_t> big((size_t(9) << 20) + 12345);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 2654435761u >> 13);
  testing::write_bytes(dir / "big", big);
  EXPECT_EQ(file_crc32(dir / "big"), uint32_t(crc32_z(0, big.data(), big.size())));
  expect_error([&] { file_crc32(dir / "nope"); }, {dir / "nope", "cannot open"});
}

TEST(Manifest, BuildWriteReadRoundTrip) {
  TempDir dir;
  const std::string split = write_split(dir, {4, 5, 5});
  EXPECT_FALSE(read_manifest(split).has_value());

  const Manifest m = write_split_manifest(split);
  EXPECT_EQ(m.split, "train");
  EXPECT_EQ(m.num_classes, kClasses);
  EXPECT_EQ(m.sample_shape, (Shape{2, 3}));
  EXPECT_EQ(m.dtype, SampleDType::u8);
  EXPECT_EQ(m.num_samples, 14);
  ASSERT_EQ(m.shards.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const ManifestShard& s = m.shards[size_t(i)];
    EXPECT_EQ(s.file, shard_format::shard_file_name(i));
    EXPECT_EQ(s.num_samples, i == 0 ? 4 : 5);
    EXPECT_EQ(s.bytes, int64_t(fs::file_size(shard_path(split, i))));
    const std::vector<uint8_t> bytes = read_all(shard_path(split, i));
    EXPECT_EQ(s.crc32, uint32_t(crc32_z(0, bytes.data(), bytes.size())));
  }

  // The documented layout (docs/formats.md).
  EXPECT_EQ(manifest_path(split), split + "/manifest.json");
  const json j = read_json(manifest_path(split));
  EXPECT_EQ(j["format"], "shardtrain.classification");
  EXPECT_EQ(j["format_version"], 2);
  EXPECT_EQ(j["split"], "train");
  EXPECT_EQ(j["num_classes"], kClasses);
  EXPECT_EQ(j["sample_shape"], json::array({2, 3}));
  EXPECT_EQ(j["dtype"], "uint8");
  EXPECT_EQ(j["num_samples"], 14);
  EXPECT_EQ(j["shards"][1]["file"], "part-00001.h5");
  EXPECT_EQ(j["shards"][1]["num_samples"], 5);
  EXPECT_EQ(j["shards"][1]["crc32"], fmt::format("{:08x}", m.shards[1].crc32));
  EXPECT_FALSE(fs::exists(manifest_path(split) + ".tmp"));

  const std::optional<Manifest> back = read_manifest(split);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->split, m.split);
  EXPECT_EQ(back->num_classes, m.num_classes);
  EXPECT_EQ(back->sample_shape, m.sample_shape);
  EXPECT_EQ(back->dtype, m.dtype);
  EXPECT_EQ(back->num_samples, m.num_samples);
  ASSERT_EQ(back->shards.size(), m.shards.size());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    EXPECT_EQ(back->shards[i].file, m.shards[i].file);
    EXPECT_EQ(back->shards[i].num_samples, m.shards[i].num_samples);
    EXPECT_EQ(back->shards[i].bytes, m.shards[i].bytes);
    EXPECT_EQ(back->shards[i].crc32, m.shards[i].crc32);
  }

  check_manifest_against_files(split, *back);
  for (int i = 0; i < 3; ++i) verify_shard(shard_path(split, i), back->shards[size_t(i)]);
  // Files that are not shards do not matter.
  write_text(split + "/README", "notes");
  write_text(split + "/part-00003.h5.tmp", "an interrupted write");
  check_manifest_against_files(split, *back);
  EXPECT_EQ(InMemoryDataset::load(split).size(), 14);
}

TEST(Manifest, BuildRefusesAnInvalidSplit) {
  TempDir dir;
  const std::string split = write_split(dir, {3, 3, 3});
  fs::remove(shard_path(split, 1));
  expect_error([&] { build_manifest(split); }, {split, "shard 1 of 3 is missing"});
  expect_error([&] { build_manifest(shard_path(split, 0)); }, {"not a directory"});
  expect_error([&] { build_manifest(dir / "nope"); }, {dir / "nope"});
}

class ManifestMismatch : public ::testing::Test {
 protected:
  void SetUp() override {
    split = write_split(dir, {4, 5, 5});
    manifest = write_split_manifest(split);
  }
  // The check must fail naming `file` and every part, and so must loading.
  void expect_mismatch(const Manifest& m, const std::string& file, std::initializer_list<std::string> parts) {
    std::vector<std::string> all(parts);
    all.push_back(file);
    const std::string message = expect_error([&] { check_manifest_against_files(split, m); }, {});
    for (const std::string& p : all) EXPECT_NE(message.find(p), std::string::npos) << p << " not in: " << message;
  }
  void expect_load_fails(std::initializer_list<std::string> parts) {
    expect_error([&] { InMemoryDataset::load(split); }, parts);
  }

  TempDir dir;
  std::string split;
  Manifest manifest;
};

TEST_F(ManifestMismatch, MissingShard) {
  fs::remove(shard_path(split, 1));
  expect_mismatch(manifest, shard_path(split, 1), {"missing", "manifest.json", "shard 1 of 3"});
  expect_load_fails({shard_path(split, 1), "missing"});
}

TEST_F(ManifestMismatch, ExtraShard) {
  fs::copy_file(shard_path(split, 2), shard_path(split, 3));
  expect_mismatch(manifest, shard_path(split, 3), {"not listed in", "lists 3 shards"});
  expect_load_fails({shard_path(split, 3), "not listed"});
}

TEST_F(ManifestMismatch, TruncatedShard) {
  const auto size = fs::file_size(shard_path(split, 2));
  fs::resize_file(shard_path(split, 2), size - 100);
  expect_mismatch(manifest, shard_path(split, 2),
                  {"truncated", fmt::format("{} bytes", size - 100), fmt::format("says {}", size)});
  expect_load_fails({shard_path(split, 2), "truncated"});
  verify_shard(shard_path(split, 0), manifest.shards[0]);
  expect_error([&] { verify_shard(shard_path(split, 2), manifest.shards[2]); }, {shard_path(split, 2), "truncated"});
}

TEST_F(ManifestMismatch, GrownShard) {
  std::ofstream(shard_path(split, 0), std::ios::app | std::ios::binary) << "trailing bytes";
  expect_mismatch(manifest, shard_path(split, 0), {"changed after the manifest was written"});
}

TEST_F(ManifestMismatch, HeaderFields) {
  Manifest m = manifest;
  m.shards[1].num_samples = 6;
  m.num_samples = 15;
  expect_mismatch(m, shard_path(split, 1), {"number of samples is 5", "says 6"});

  m = manifest;
  m.sample_shape = Shape{3, 2};
  expect_mismatch(m, shard_path(split, 0), {"sample shape is [2, 3]", "says [3, 2]"});

  m = manifest;
  m.dtype = SampleDType::f32;
  expect_mismatch(m, shard_path(split, 0), {"dtype is uint8", "says float32"});

  m = manifest;
  m.num_classes = 10;
  expect_mismatch(m, shard_path(split, 0), {"num_classes is 5", "says 10"});

  m = manifest;
  m.split = "test";
  expect_mismatch(m, shard_path(split, 0), {"split is train", "says test"});
}

TEST_F(ManifestMismatch, ShardRewrittenWithOtherData) {
  // Shard 1 replaced by one of another split with other sizes: the first
  // difference found names it.
  TempDir other;
  const std::string other_split = write_split(other, {7, 2, 5});
  fs::copy_file(shard_path(other_split, 1), shard_path(split, 1), fs::copy_options::overwrite_existing);
  expect_mismatch(manifest, shard_path(split, 1), {});
  expect_load_fails({shard_path(split, 1)});
}

TEST_F(ManifestMismatch, FlippedByteFailsTheChecksum) {
  const std::string path = shard_path(split, 1);
  std::vector<uint8_t> bytes = read_all(path);
  bytes[bytes.size() / 2] ^= 0x10;
  testing::write_bytes(path, bytes);
  // Same size and header: only the checksum tells.
  check_manifest_against_files(split, manifest);
  const std::string message =
      expect_error([&] { verify_shard(path, manifest.shards[1]); }, {path, "checksum mismatch"});
  EXPECT_NE(message.find(fmt::format("{:08x}", manifest.shards[1].crc32)), std::string::npos) << message;
  verify_shard(shard_path(split, 0), manifest.shards[0]);
}

// A manifest edited into something invalid: the error names manifest.json
// and the field.
class MalformedManifest : public ::testing::Test {
 protected:
  void SetUp() override {
    split = write_split(dir, {3, 3});
    write_split_manifest(split);
    good = read_json(manifest_path(split));
  }
  void expect_rejected(const json& j, std::initializer_list<std::string> parts) {
    write_text(manifest_path(split), j.dump());
    std::vector<std::string> all(parts);
    all.push_back(manifest_path(split));
    const std::string message = expect_error([&] { read_manifest(split); }, {});
    for (const std::string& p : all) EXPECT_NE(message.find(p), std::string::npos) << p << " not in: " << message;
    expect_error([&] { InMemoryDataset::load(split); }, {manifest_path(split)});
  }

  TempDir dir;
  std::string split;
  json good;
};

TEST_F(MalformedManifest, NotJson) {
  write_text(manifest_path(split), "{\"format\": \"shardtrain.classification\",\n  \"shards\": [");
  expect_error([&] { read_manifest(split); }, {manifest_path(split), "not valid JSON", "line 2"});
  write_text(manifest_path(split), "");
  expect_error([&] { read_manifest(split); }, {manifest_path(split), "not valid JSON"});
  write_text(manifest_path(split), "[1, 2]");
  expect_error([&] { read_manifest(split); }, {manifest_path(split), "expected a JSON object"});
  // A number beyond a double's range is nlohmann's out_of_range, not a parse_error.
  write_text(manifest_path(split), "{\"samples\": 4e1111111111}");
  expect_error([&] { read_manifest(split); }, {manifest_path(split), "not valid JSON", "number overflow"});
}

TEST_F(MalformedManifest, Fields) {
  json j = good;
  j.erase("shards");
  expect_rejected(j, {"shards is missing"});
  j = good;
  j["format"] = "other.format";
  expect_rejected(j, {"format is 'other.format'"});
  j = good;
  j["format_version"] = 3;
  expect_rejected(j, {"format_version 3 is not supported"});
  j = good;
  j["num_classes"] = "five";
  expect_rejected(j, {"num_classes: expected an integer"});
  j = good;
  j["dtype"] = "int16";
  expect_rejected(j, {"dtype is 'int16'"});
  j = good;
  j["sample_shape"] = json::array({2, 0});
  expect_rejected(j, {"sample_shape"});
  j = good;
  j["num_samples"] = 7;
  expect_rejected(j, {"num_samples is 7 but the shards hold 6"});
  j = good;
  j["shards"][1]["crc32"] = "12345";
  expect_rejected(j, {"shards[1].crc32 is '12345', expected 8 hex digits"});
  j = good;
  j["shards"][1]["crc32"] = "1234567g";
  expect_rejected(j, {"shards[1].crc32"});
  j = good;
  j["shards"][0]["file"] = "../../etc/passwd";
  expect_rejected(j, {"shards[0].file '../../etc/passwd' is not a shard name"});
  j = good;
  std::swap(j["shards"][0], j["shards"][1]);
  expect_rejected(j, {"shards[1].file 'part-00000.h5' is not after 'part-00001.h5'"});
  j = good;
  j["shards"][0]["bytes"] = -1;
  expect_rejected(j, {"shards[0].bytes is -1"});
  j = good;
  j["shards"] = json::array();
  expect_rejected(j, {"shards: expected a non-empty list"});
}

TEST(Manifest, SingleFileSplitNeedsNoManifest) {
  TempDir dir;
  const std::string split = write_split(dir, {6});
  EXPECT_EQ(InMemoryDataset::load(shard_path(split, 0)).size(), 6);
}

}  // namespace
}  // namespace shardtrain::io
