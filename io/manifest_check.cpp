// Does a split directory still hold what its manifest says? The cheap checks
// (names, sizes, headers) run on every load; the checksum, which reads the
// whole file, runs where a file is copied (verify_shard).
#include "io/manifest.h"

#include "io/shard_format.h"
#include "io/shard_reader.h"
#include "runtime/core/error.h"

#include <filesystem>
#include <set>

namespace shardtrain::io {

namespace {

namespace fs = std::filesystem;

// Every difference ends with this hint: the fix is either restoring the file
// or, when the change was deliberate, writing the manifest again.
constexpr const char* kHint = "(restore the file, or rewrite the manifest with `shardtrain prep manifest`)";

int64_t size_of(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  ST_CHECK(!ec, "{}: cannot read the file size: {}", path, ec.message());
  return int64_t(size);
}

// The size check alone: a short file is a truncated copy, a longer one was
// rewritten; either way its contents are not what the checksum describes.
void check_size(const std::string& path, int64_t actual, int64_t expected, const std::string& source) {
  ST_CHECK(actual >= expected, "{}: truncated: {} bytes, {} says {} {}", path, actual, source, expected, kHint);
  ST_CHECK(actual == expected, "{}: {} bytes, {} says {}: the file changed after the manifest was written {}", path,
           actual, source, expected, kHint);
}

template <typename T>
void check_field(const std::string& path, const char* what, const T& in_file, const T& in_manifest,
                 const std::string& manifest) {
  ST_CHECK(in_file == in_manifest, "{}: {} is {} but {} says {} {}", path, what, in_file, manifest, in_manifest, kHint);
}

}  // namespace

void check_manifest_lists_files(const std::string& split_dir, const Manifest& manifest) {
  const std::string manifest_file = manifest_path(split_dir);
  ST_CHECK(!manifest.shards.empty(), "{}: lists no shards", manifest_file);

  // 1. Every listed shard is there (before anything opens it, so that a
  //    missing shard is reported as such rather than as an HDF5 error).
  std::set<std::string> listed;
  for (size_t i = 0; i < manifest.shards.size(); ++i) {
    const ManifestShard& shard = manifest.shards[i];
    int index = 0;
    // A name that is not a shard name could point outside the directory.
    ST_CHECK(shard_format::parse_shard_file_name(shard.file, &index), "{}: shard file '{}' is not a name part-NNNNN.h5",
             manifest_file, shard.file);
    const std::string path = (fs::path(split_dir) / shard.file).string();
    std::error_code ec;
    ST_CHECK(fs::is_regular_file(path, ec), "{}: missing: {} lists it as shard {} of {} ({} samples)", path,
             manifest_file, i, manifest.shards.size(), shard.num_samples);
    listed.insert(shard.file);
  }

  // 2. No shard the manifest does not know: the loader would read it too.
  for (const std::string& path : shard_format::list_shard_files(split_dir)) {
    const std::string name = fs::path(path).filename().string();
    ST_CHECK(listed.contains(name), "{}: shard file not listed in {}, which lists {} shards {}", path, manifest_file,
             manifest.shards.size(), kHint);
  }

  // 3. Sizes.
  for (const ManifestShard& shard : manifest.shards) {
    const std::string path = (fs::path(split_dir) / shard.file).string();
    check_size(path, size_of(path), shard.bytes, manifest_file);
  }
}

void check_manifest_against_files(const std::string& split_dir, const Manifest& manifest) {
  check_manifest_lists_files(split_dir, manifest);
  // 4. What each file's header declares.
  const std::string manifest_file = manifest_path(split_dir);
  for (const ManifestShard& shard : manifest.shards) {
    const std::string path = (fs::path(split_dir) / shard.file).string();
    const ShardReader reader(path);  // its own errors (not HDF5, wrong version) name the file
    const shard_format::ShardHeader& h = reader.header();
    check_field(path, "format_version", h.version, manifest.format_version, manifest_file);
    check_field(path, "split", h.split, manifest.split, manifest_file);
    check_field(path, "num_classes", h.num_classes, manifest.num_classes, manifest_file);
    check_field(path, "the sample shape", h.sample_shape.str(), manifest.sample_shape.str(), manifest_file);
    check_field(path, "the dtype", std::string(shard_format::dtype_name(h.dtype)),
                std::string(shard_format::dtype_name(manifest.dtype)), manifest_file);
    check_field(path, "the number of samples", h.num_samples, shard.num_samples, manifest_file);
  }
}

void verify_shard(const std::string& path, const ManifestShard& shard) {
  check_size(path, size_of(path), shard.bytes, fmt::format("the manifest (for {})", shard.file));
  const uint32_t crc = file_crc32(path);
  ST_CHECK(crc == shard.crc32, "{}: checksum mismatch: crc32 {:08x}, the manifest says {:08x} for {} (corrupt file)",
           path, crc, shard.crc32, shard.file);
}

}  // namespace shardtrain::io
