#include "io/shard_upgrade.h"

#include "io/dataset_writer.h"
#include "io/shard_format.h"
#include "runtime/core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;

// Samples per read when a shard is copied or checked whole: about the chunk
// size the writer uses, so memory stays small for shards of any size.
int64_t block_rows(const shard_format::ShardHeader& h) {
  return std::max<int64_t>(1, shard_format::kChunkBytes / int64_t(shard_format::sample_bytes(h)));
}

// Rewrites `reader`'s file as the current version: same header, samples and
// labels, plus their checksums; published atomically over the old file.
void rewrite(const ShardReader& reader) {
  const shard_format::ShardHeader& h = reader.header();
  const std::vector<int32_t> labels = reader.read_labels();
  ShardWriter writer(reader.path(), h);
  const int64_t rows = writer.chunk_rows();
  std::vector<char> x(size_t(rows) * shard_format::sample_bytes(h));
  for (int64_t first = 0; first < h.num_samples; first += rows) {
    const int64_t count = std::min(rows, h.num_samples - first);
    reader.read_x(first, count, x.data());
    writer.append(x.data(), labels.data() + first, count);
  }
  writer.finish();
}

}  // namespace

void verify_all_samples(const ShardReader& shard) {
  const shard_format::ShardHeader& h = shard.header();
  ST_CHECK(h.version >= 2, "{}: format version {} has no per-sample checksums", shard.path(), h.version);
  const std::vector<int32_t> labels = shard.read_labels();
  const std::vector<uint32_t> crcs = shard.read_checksums();
  const int64_t rows = block_rows(h);
  const size_t bytes = shard_format::sample_bytes(h);
  std::vector<char> x(size_t(rows) * bytes);
  for (int64_t first = 0; first < h.num_samples; first += rows) {
    const int64_t count = std::min(rows, h.num_samples - first);
    shard.read_x(first, count, x.data());
    shard_format::verify_samples(
        shard.path(), x.data(), bytes, count, [first](int64_t k) { return first + k; }, labels, crcs);
  }
}

UpgradeSummary upgrade_split(const std::string& split_dir, const std::function<void(const std::string&)>& progress) {
  ST_CHECK(fs::is_directory(split_dir), "{}: not a directory (prep upgrade converts a split directory)", split_dir);
  const std::vector<std::string> files = shard_format::list_shard_files(split_dir);
  const std::optional<Manifest> manifest = read_manifest(split_dir);
  UpgradeSummary summary;
  summary.had_manifest = manifest.has_value();
  if (manifest) {
    ST_CHECK(manifest->shards.size() == files.size(),
             "{}: lists {} shard(s) but the directory holds {}: the split does not match its manifest, so its "
             "contents cannot be checked before they get checksums",
             manifest_path(split_dir), manifest->shards.size(), files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      ST_CHECK(manifest->shards[i].file == fs::path(files[i]).filename().string(),
               "{}: shard {} is {} in the manifest but {} in the directory", manifest_path(split_dir), i,
               manifest->shards[i].file, fs::path(files[i]).filename().string());
    }
  }

  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i];
    // A file that matches the manifest is the one that was written: safe to
    // open and to convert. One that does not is either converted already
    // (an interrupted upgrade) or corrupt; only its own checksums can tell.
    std::string mismatch;
    if (manifest) {
      try {
        verify_shard(path, manifest->shards[i]);
      } catch (const Error& e) {
        mismatch = e.what();
      }
    }
    const ShardReader reader(path);
    const int64_t version = reader.header().version;
    summary.samples += reader.header().num_samples;
    if (version >= shard_format::kVersion) {
      verify_all_samples(reader);
      ++summary.current;
      if (progress) progress(fmt::format("{}: version {} already, every sample checked", path, version));
      continue;
    }
    ST_CHECK(mismatch.empty(), "{}; refusing to add checksums to a file that may be corrupt", mismatch);
    rewrite(reader);
    ++summary.upgraded;
    if (progress) {
      progress(fmt::format("{}: version {} -> {}, {} samples{}", path, version, shard_format::kVersion,
                           reader.header().num_samples, manifest ? " (checked against the manifest first)" : ""));
    }
  }
  summary.manifest = write_split_manifest(split_dir);
  return summary;
}

}  // namespace shardtrain::io
