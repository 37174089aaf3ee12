#include "io/generated_split.h"

#include "io/dataset_writer.h"
#include "io/shard_format.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <filesystem>
#include <vector>

namespace shardtrain::io {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kGiB = int64_t(1) << 30;
// HDF5's own bytes per shard (superblock, B-tree of the chunks, attributes),
// generously: only for the free-space check.
constexpr int64_t kShardOverhead = int64_t(1) << 20;

// Shard i of n samples in s shards: [n*i/s, n*(i+1)/s), written so that n*i
// cannot overflow.
int64_t shard_begin(int64_t n, int64_t s, int64_t i) { return n / s * i + n % s * i / s; }

}  // namespace

void check_new_split_dir(const std::string& dir) {
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

// `dir` may not exist yet: its nearest existing ancestor is on the same file
// system, most likely.
void check_free_space(const std::string& dir, int64_t bytes) {
  std::error_code ec;
  fs::path existing = fs::absolute(dir, ec);
  while (!ec && !fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  const fs::space_info space = fs::space(existing, ec);
  if (ec) return;  // unknown: let the writes report a full disk
  ST_CHECK(int64_t(space.available) >= bytes, "{}: needs about {:.2f} GB but only {:.2f} GB are free", dir,
           double(bytes) / 1e9, double(space.available) / 1e9);
}

int64_t generated_split_bytes(const GeneratedSplit& s) {
  const auto sample = int64_t(s.sample_shape.numel() * int64_t(shard_format::dtype_size(s.dtype)));
  return s.samples * (sample + 8) + s.shards * kShardOverhead;  // + label, checksum
}

Manifest write_generated_split(const GeneratedSplit& g, const GenerateSamples& generate,
                               const std::function<void(const std::string&)>& progress) {
  ST_ASSERT(g.samples >= g.shards && g.shards >= 1 && g.block_bytes >= 1);
  std::error_code ec;
  fs::create_directories(g.out_dir, ec);
  ST_CHECK(!ec, "{}: cannot create directory: {}", g.out_dir, ec.message());
  const auto sample_bytes = int64_t(g.sample_shape.numel() * int64_t(shard_format::dtype_size(g.dtype)));
  const int64_t total_bytes = g.samples * sample_bytes;

  Manifest manifest;
  manifest.split = g.split;
  manifest.num_classes = g.num_classes;
  manifest.sample_shape = g.sample_shape;
  manifest.dtype = g.dtype;
  manifest.num_samples = g.samples;

  const double t0 = now_seconds();
  int64_t bytes_done = 0, bytes_at_last_line = 0;
  std::vector<uint8_t> x;
  std::vector<int32_t> y;
  auto rate = [&] { return double(bytes_done) / 1e6 / std::max(now_seconds() - t0, 1e-9); };

  for (int s = 0; s < g.shards; ++s) {
    const int64_t begin = shard_begin(g.samples, g.shards, s);
    const int64_t end = shard_begin(g.samples, g.shards, s + 1);
    shard_format::ShardHeader header;
    header.split = g.split;
    header.num_classes = g.num_classes;
    header.shard_index = s;
    header.num_shards = g.shards;
    header.num_samples = end - begin;
    header.sample_shape = g.sample_shape;
    header.dtype = g.dtype;

    const std::string path = (fs::path(g.out_dir) / shard_format::shard_file_name(s)).string();
    ShardWriter writer(path, header);
    // Whole chunks per append (HDF5 then writes each chunk straight from
    // the buffer); at least one chunk even when it exceeds the block.
    const int64_t chunk = writer.chunk_rows();
    const int64_t rows = std::max<int64_t>(1, g.block_bytes / sample_bytes / chunk) * chunk;
    x.resize(size_t(std::min(rows, end - begin) * sample_bytes));
    y.resize(size_t(std::min(rows, end - begin)));

    for (int64_t first = begin; first < end; first += rows) {
      const int64_t count = std::min(rows, end - first);
      generate(first, count, x.data(), y.data());
      writer.append(x.data(), y.data(), count);
      bytes_done += count * sample_bytes;
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
                           double(manifest.shards.back().bytes) / 1e6, s + 1, g.shards, rate()));
    }
    bytes_at_last_line = bytes_done;
  }

  write_manifest(g.out_dir, manifest);
  if (progress) progress(fmt::format("wrote {}", manifest_path(g.out_dir)));
  return manifest;
}

}  // namespace shardtrain::io
