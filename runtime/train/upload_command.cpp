#include "runtime/train/upload_command.h"

#include "io/manifest.h"
#include "io/s3/client.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

namespace shardtrain::train {

int upload_command(const std::string& split_dir, const std::string& url, bool create_bucket, const io::S3Options& s3) {
  const double t0 = now_seconds();
  const std::optional<io::Manifest> manifest = io::read_manifest(split_dir);
  ST_CHECK(manifest.has_value(),
           "{}: no {} (readers check every object against it): run `shardtrain prep manifest "
           "{}` first",
           split_dir, io::kManifestFile, split_dir);
  io::check_manifest_lists_files(split_dir, *manifest);
  const io::S3Location where = io::parse_s3_url(url);
  io::S3Client client(s3, [](const std::string& line) {
    fmt::print("[upload] {}\n", line);
    std::fflush(stdout);
  });
  int64_t total = 0;
  for (const io::ManifestShard& s : manifest->shards) total += s.bytes;
  fmt::print("[upload] {} -> {} at {}: {} shard(s), {:.1f} MB\n", split_dir, url, client.describe(),
             manifest->shards.size(), double(total) / 1e6);
  std::fflush(stdout);
  if (create_bucket) client.create_bucket(where.bucket);
  const size_t n = manifest->shards.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string& file = manifest->shards[i].file;
    const io::S3Transfer t = client.upload((std::filesystem::path(split_dir) / file).string(), io::s3_child(url, file));
    fmt::print("[upload] {}/{} {}: {:.2f} MB in {:.2f} s ({:.1f} MB/s{})\n", i + 1, n, file, double(t.bytes) / 1e6,
               t.seconds, t.seconds > 0 ? double(t.bytes) / 1e6 / t.seconds : 0.0,
               t.parts > 0 ? fmt::format(", {} parts", t.parts) : "");
    std::fflush(stdout);
  }
  client.upload(io::manifest_path(split_dir), io::s3_child(url, io::kManifestFile));
  fmt::print("[upload] {} shard(s) and {} in {}, {:.1f} s\n", n, io::kManifestFile, url, now_seconds() - t0);
  return 0;
}

int upload_object_command(const std::string& path, const std::string& url, const io::S3Options& s3) {
  io::S3Client client(s3);
  const io::S3Transfer t = client.upload(path, url);
  fmt::print("[upload] {} -> {}: {:.2f} MB in {:.2f} s\n", path, url, double(t.bytes) / 1e6, t.seconds);
  return 0;
}

}  // namespace shardtrain::train
