// read_idx_gz: a good file reads back exactly; every kind of damage is an
// Error naming the file (and the byte counts where they apply).
#include "io/idx_reader.h"
#include "io_test_util.h"

#include <gtest/gtest.h>

namespace shardtrain::io {
namespace {

using testing::expect_error;
using testing::idx_bytes;
using testing::TempDir;
using testing::write_bytes;
using testing::write_gz;

std::vector<uint8_t> pixels(size_t n) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(i * 31 + 7);
  return p;
}

TEST(IdxReader, ReadsImagesAndLabels) {
  TempDir dir;
  write_gz(dir / "images.gz", idx_bytes(kIdxImagesMagic, {3, 4, 5}, pixels(60)));
  write_gz(dir / "labels.gz", idx_bytes(kIdxLabelsMagic, {3}, {2, 0, 9}));

  IdxArray images = read_idx_gz(dir / "images.gz", kIdxImagesMagic);
  EXPECT_EQ(images.dims, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(images.data, pixels(60));
  IdxArray labels = read_idx_gz(dir / "labels.gz", kIdxLabelsMagic);
  EXPECT_EQ(labels.dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(labels.data, (std::vector<uint8_t>{2, 0, 9}));
}

TEST(IdxReader, WrongMagic) {
  TempDir dir;
  write_gz(dir / "labels.gz", idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  expect_error([&] { read_idx_gz(dir / "labels.gz", kIdxImagesMagic); },
               {dir / "labels.gz", "magic number 0x00000801, expected 0x00000803"});
}

TEST(IdxReader, TruncatedPayload) {
  TempDir dir;
  write_gz(dir / "images.gz", idx_bytes(kIdxImagesMagic, {3, 4, 5}, pixels(59)));
  expect_error([&] { read_idx_gz(dir / "images.gz", kIdxImagesMagic); },
               {dir / "images.gz", "truncated", "59 bytes", "3x4x5", "declares 60"});
}

TEST(IdxReader, TrailingGarbage) {
  TempDir dir;
  write_gz(dir / "images.gz", idx_bytes(kIdxImagesMagic, {3, 4, 5}, pixels(67)));
  expect_error([&] { read_idx_gz(dir / "images.gz", kIdxImagesMagic); },
               {dir / "images.gz", "7 bytes of trailing garbage", "payload of 60 bytes"});
}

TEST(IdxReader, NotGzip) {
  TempDir dir;
  write_bytes(dir / "plain.gz", idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  expect_error([&] { read_idx_gz(dir / "plain.gz", kIdxLabelsMagic); }, {dir / "plain.gz", "not a gzip file"});
}

TEST(IdxReader, EmptyFile) {
  TempDir dir;
  write_bytes(dir / "empty.gz", {});
  expect_error([&] { read_idx_gz(dir / "empty.gz", kIdxLabelsMagic); }, {dir / "empty.gz", "empty"});
}

TEST(IdxReader, EmptyGzipStream) {
  TempDir dir;
  write_gz(dir / "nothing.gz", {});
  expect_error([&] { read_idx_gz(dir / "nothing.gz", kIdxLabelsMagic); },
               {dir / "nothing.gz", "truncated header (0 of 4 bytes)"});
}

TEST(IdxReader, CutOffGzipStream) {
  TempDir dir;
  write_gz(dir / "whole.gz", idx_bytes(kIdxImagesMagic, {30, 40, 50}, pixels(60000)));
  std::ifstream in(dir / "whole.gz", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  write_bytes(dir / "cut.gz", bytes);
  expect_error([&] { read_idx_gz(dir / "cut.gz", kIdxImagesMagic); },
               {dir / "cut.gz", "truncated (the gzip stream is cut off)", "declares 60000"});
}

TEST(IdxReader, MissingFile) {
  TempDir dir;
  expect_error([&] { read_idx_gz(dir / "absent.gz", kIdxLabelsMagic); }, {dir / "absent.gz", "no such file"});
}

}  // namespace
}  // namespace shardtrain::io
