// Where a shard's samples lie in its file: for a shard of many chunks, the
// bytes at each sample's offset (read with pread, buffered and O_DIRECT)
// are what HDF5 reads for it; pieces of a run never cross a chunk; a
// truncated file is an error naming what was read.
#include "io/dataset_writer.h"
#include "io/positional_read.h"
#include "io/shard_reader.h"
#include "tests/unit/io_test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace shardtrain;
using ::testing::HasSubstr;

namespace {

// 45 samples of 3x100x100 bytes (30000): 34 per 1 MiB chunk, so two chunks.
io::shard_format::ShardHeader header_of(int64_t n) {
  io::shard_format::ShardHeader h;
  h.split = "train";
  h.num_classes = 5;
  h.num_shards = 1;
  h.num_samples = n;
  h.sample_shape = Shape{3, 100, 100};
  h.dtype = io::SampleDType::u8;
  return h;
}

std::string write_test_shard(const io::testing::TempDir& dir, int64_t n) {
  const io::shard_format::ShardHeader h = header_of(n);
  std::vector<uint8_t> x(static_cast<size_t>(n * h.sample_shape.numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint8_t((i * 2654435761u) >> 13);
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = int32_t(i % 5);
  const std::string path = dir / io::shard_format::shard_file_name(0);
  io::write_shard(path, h, x.data(), y.data());
  return path;
}

}  // namespace

TEST(SampleExtents, EverySampleIsAtItsOffsetBufferedAndDirect) {
  io::testing::TempDir dir;
  const std::string path = write_test_shard(dir, 45);
  io::ShardReader reader(path);
  std::string why;
  const std::optional<io::SampleExtents> e = reader.x_extents(&why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->sample_bytes, 30000u);
  EXPECT_GT(e->chunk_offset.size(), 1u) << "the test needs a shard of several chunks";
  const int fd = ::open(path.c_str(), O_RDONLY), direct = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  // A temp dir on tmpfs has no O_DIRECT (EINVAL): the buffered reads are checked alone there.
  std::vector<uint8_t> want(e->sample_bytes), got(e->sample_bytes), got_direct(e->sample_bytes);
  for (int64_t i = 0; i < 45; ++i) {
    reader.read_x(i, 1, want.data());
    io::read_at(fd, got.data(), got.size(), e->offset_of(i), "buffered");
    ASSERT_EQ(got, want) << "sample " << i;
    if (direct < 0) continue;
    io::read_direct(direct, got_direct.data(), got_direct.size(), e->offset_of(i), "direct");
    ASSERT_EQ(got_direct, want) << "sample " << i;
  }
  ::close(fd);
  if (direct >= 0) ::close(direct);
}

TEST(SampleExtents, PiecesOfARunStopAtChunks) {
  io::SampleExtents e;
  e.num_samples = 10;
  e.chunk_rows = 4;
  e.sample_bytes = 100;
  e.chunk_offset = {1000, 5000, 9000};
  std::vector<std::array<int64_t, 3>> pieces;
  e.for_each_piece(3, 6, [&](int64_t offset, int64_t first, int64_t count) {
    pieces.push_back({offset, first, count});
  });
  const std::vector<std::array<int64_t, 3>> want = {{1300, 3, 1}, {5000, 4, 4}, {9000, 8, 1}};
  EXPECT_EQ(pieces, want);
}

TEST(SampleExtents, ATruncatedFileIsAnErrorNamingTheRead) {
  io::testing::TempDir dir;
  const std::string path = write_test_shard(dir, 45);
  const std::optional<io::SampleExtents> e = io::ShardReader(path).x_extents(nullptr);
  ASSERT_TRUE(e);
  ASSERT_EQ(::truncate(path.c_str(), e->offset_of(44) + 100), 0);
  const int fd = ::open(path.c_str(), O_RDONLY), direct = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  std::vector<uint8_t> buf(e->sample_bytes);
  try {
    io::read_at(fd, buf.data(), buf.size(), e->offset_of(44), "part-00000.h5: /x: samples [44, 45)");
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("part-00000.h5: /x: samples [44, 45): the file ends at byte"));
  }
  if (direct >= 0) {
    EXPECT_THROW(io::read_direct(direct, buf.data(), buf.size(), e->offset_of(44), "direct"), Error);
  }
  ::close(fd);
  if (direct >= 0) ::close(direct);
}
