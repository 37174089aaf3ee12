#include "io/synthetic.h"

#include "io/dataset_writer.h"
#include "io/shard_format.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

namespace shardtrain::io {

namespace {

namespace fs = std::filesystem;

// Rng stream purposes: the bytes and the label of a sample draw from
// different streams, so neither depends on the other's length.
constexpr uint64_t kPurposeBytes = 0x5359'4e58;  // "SYNX"
constexpr uint64_t kPurposeLabel = 0x5359'4e59;  // "SYNY"

constexpr int64_t kGiB = int64_t(1) << 30;
// HDF5's own bytes per shard (superblock, B-tree of the chunks, attributes),
// generously: only for the free-space check.
constexpr int64_t kShardOverhead = int64_t(1) << 20;

void validate(const SyntheticOptions& o) {
  ST_CHECK(!o.out_dir.empty(), "prep synthetic: no output directory (--out)");
  ST_CHECK(o.samples >= 1, "prep synthetic: samples is {}, it must be >= 1", o.samples);
  ST_CHECK(o.sample_bytes >= 1, "prep synthetic: sample bytes is {}, it must be >= 1", o.sample_bytes);
  ST_CHECK(o.shards >= 1 && o.shards <= 99999, "prep synthetic: shards is {}, it must be in [1, 99999]", o.shards);
  ST_CHECK(o.shards <= o.samples, "prep synthetic: shards is {} but there are only {} samples (one at least per shard)",
           o.shards, o.samples);
  ST_CHECK(o.num_classes >= 1, "prep synthetic: classes is {}, it must be >= 1", o.num_classes);
  ST_CHECK(!o.split.empty(), "prep synthetic: the split name is empty");
  ST_CHECK(o.block_bytes >= 1, "prep synthetic: block bytes is {}, it must be >= 1", o.block_bytes);
  ST_CHECK(o.samples <= INT64_MAX / (o.sample_bytes + 4), "prep synthetic: {} samples of {} bytes overflow 64 bits",
           o.samples, o.sample_bytes);
}

// A data set is written into a directory of its own: mixing its shards with
// another's (or leaving an old manifest) would make a split that lies.
void check_out_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  ST_CHECK(fs::is_directory(dir, ec), "{}: exists and is not a directory", dir);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool shard = name.starts_with("part-") && name.ends_with(".h5");
    ST_CHECK(!shard && name != kManifestFile,
             "{}: already holds a data set ({}); remove it or choose another directory", dir, name);
  }
  ST_CHECK(!ec, "{}: cannot list directory: {}", dir, ec.message());
}

// Before anything is created: a data set that cannot fit fails now, not
// after filling the disk. `dir` may not exist yet: its nearest existing
// ancestor is on the same file system, most likely.
void check_free_space(const std::string& dir, int64_t needed) {
  std::error_code ec;
  fs::path existing = fs::absolute(dir, ec);
  while (!ec && !fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  const fs::space_info space = fs::space(existing, ec);
  if (ec) return;  // unknown: let the writes report a full disk
  ST_CHECK(int64_t(space.available) >= needed, "{}: needs about {:.2f} GB but only {:.2f} GB are free", dir,
           double(needed) / 1e9, double(space.available) / 1e9);
}

// Shard i of n samples in s shards: [n*i/s, n*(i+1)/s), written so that n*i
// cannot overflow.
int64_t shard_begin(int64_t n, int64_t s, int64_t i) { return n / s * i + n % s * i / s; }

}  // namespace

void synthetic_sample(uint64_t seed, int64_t index, int64_t sample_bytes, uint8_t* out) {
  // Little-endian words: the bytes for a seed are the same on every host shardtrain builds for.
  static_assert(std::endian::native == std::endian::little);
  Rng rng(stream_key(seed, kPurposeBytes, uint64_t(index)));
  int64_t i = 0;
  for (; i + 8 <= sample_bytes; i += 8) {
    const uint64_t word = rng.next_u64();
    std::memcpy(out + i, &word, 8);
  }
  if (i < sample_bytes) {
    const uint64_t word = rng.next_u64();
    std::memcpy(out + i, &word, size_t(sample_bytes - i));
  }
}

int32_t synthetic_label(uint64_t seed, int64_t index, int32_t num_classes) {
  return int32_t(Rng(stream_key(seed, kPurposeLabel, uint64_t(index))).below(uint64_t(num_classes)));
}

Manifest prep_synthetic(const SyntheticOptions& o, const std::function<void(const std::string&)>& progress) {
  validate(o);
  check_out_dir(o.out_dir);
  check_free_space(o.out_dir, o.samples * (o.sample_bytes + 8) + o.shards * kShardOverhead);  // + label, checksum
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  ST_CHECK(!ec, "{}: cannot create directory: {}", o.out_dir, ec.message());
  const int64_t total_bytes = o.samples * o.sample_bytes;

  Manifest manifest;
  manifest.split = o.split;
  manifest.num_classes = o.num_classes;
  manifest.sample_shape = Shape{o.sample_bytes};
  manifest.dtype = SampleDType::u8;
  manifest.num_samples = o.samples;

  const double t0 = now_seconds();
  int64_t bytes_done = 0, bytes_at_last_line = 0;
  std::vector<uint8_t> x;
  std::vector<int32_t> y;
  auto rate = [&] { return double(bytes_done) / 1e6 / std::max(now_seconds() - t0, 1e-9); };

  for (int s = 0; s < o.shards; ++s) {
    const int64_t begin = shard_begin(o.samples, o.shards, s);
    const int64_t end = shard_begin(o.samples, o.shards, s + 1);
    shard_format::ShardHeader header;
    header.split = o.split;
    header.num_classes = o.num_classes;
    header.shard_index = s;
    header.num_shards = o.shards;
    header.num_samples = end - begin;
    header.sample_shape = manifest.sample_shape;
    header.dtype = SampleDType::u8;

    const std::string path = (fs::path(o.out_dir) / shard_format::shard_file_name(s)).string();
    ShardWriter writer(path, header);
    // Whole chunks per append (HDF5 then writes each chunk straight from
    // the buffer); at least one chunk even when it exceeds the block.
    const int64_t chunk = writer.chunk_rows();
    const int64_t rows = std::max<int64_t>(1, o.block_bytes / o.sample_bytes / chunk) * chunk;
    x.resize(size_t(std::min(rows, end - begin) * o.sample_bytes));
    y.resize(size_t(std::min(rows, end - begin)));

    for (int64_t first = begin; first < end; first += rows) {
      const int64_t count = std::min(rows, end - first);
      for (int64_t i = 0; i < count; ++i) {
        synthetic_sample(o.seed, first + i, o.sample_bytes, x.data() + i * o.sample_bytes);
        y[size_t(i)] = synthetic_label(o.seed, first + i, o.num_classes);
      }
      writer.append(x.data(), y.data(), count);
      bytes_done += count * o.sample_bytes;
      if (progress && bytes_done - bytes_at_last_line >= kGiB && first + count < end) {
        progress(fmt::format("{}: {:.1f} of {:.1f} GB written ({:.0f} MB/s)", path, double(bytes_done) / 1e9,
                             double(total_bytes) / 1e9, rate()));
        bytes_at_last_line = bytes_done;
      }
    }
    writer.finish();
    // Checksummed now, while the file is likely still in the page cache.
    manifest.shards.push_back(describe_shard(path, end - begin));
    if (progress) {
      progress(fmt::format("wrote {} ({} samples, {:.1f} MB; shard {} of {}, {:.0f} MB/s)", path, end - begin,
                           double(manifest.shards.back().bytes) / 1e6, s + 1, o.shards, rate()));
    }
    bytes_at_last_line = bytes_done;
  }

  write_manifest(o.out_dir, manifest);
  if (progress) progress(fmt::format("wrote {}", manifest_path(o.out_dir)));
  return manifest;
}

}  // namespace shardtrain::io
