#include "runtime/train/stage_command.h"

#include "io/cache.h"
#include "runtime/core/clock.h"

#include <fmt/format.h>

#include <cstdio>

namespace shardtrain::train {
namespace {

std::string size_text(int64_t bytes) {
  return bytes >= 1'000'000'000 ? fmt::format("{:.2f} GB", double(bytes) / 1e9)
                                : fmt::format("{:.1f} MB", double(bytes) / 1e6);
}

}  // namespace

int stage_command(const std::string& source_dir, const io::StageOptions& options) {
  const double t0 = now_seconds();
  io::validate(options);
  io::ShardCache cache(source_dir, options);
  int64_t total_bytes = 0;
  for (const io::ManifestShard& s : cache.manifest().shards) total_bytes += s.bytes;
  fmt::print("[stage] {}{} -> {}: {} shard(s), {}, rate {}, blocks of {} KiB, capacity {}, {}{}\n", source_dir,
             cache.remote() ? " at " + cache.store_description() : std::string(), cache.cache_dir(),
             cache.manifest().shards.size(), size_text(total_bytes),
             options.rate_mb_s > 0 ? fmt::format("{} MB/s", options.rate_mb_s) : std::string("unlimited"),
             cache.remote() ? options.s3.part_mib * 1024 : options.block_kib,
             options.capacity_gb > 0 ? fmt::format("{} GB", options.capacity_gb) : std::string("unlimited"),
             options.verify ? "verified against the manifest" : "not verified", options.direct_io ? ", O_DIRECT" : "");
  std::fflush(stdout);
  const io::StageStats s = cache.run([](const std::string& line) {
    fmt::print("[stage] {}\n", line);
    std::fflush(stdout);
  });
  fmt::print(
      "[stage] {}/{} shard(s) in {} ({} already there), {} copied in {:.1f} s ({:.1f} MB/s), "
      "{} evicted, {} checksum failure(s){}, {:.1f} s in all\n",
      s.shards_cached, cache.manifest().shards.size(), cache.cache_dir(), s.shards_kept, size_text(s.bytes_copied),
      s.copy_seconds, s.rate_mb_s(), s.shards_evicted, s.checksum_failures,
      cache.remote() ? fmt::format(", {} request(s), {} retried", s.store_requests, s.store_retries) : std::string(),
      now_seconds() - t0);
  std::fflush(stdout);
  if (s.shards_failed > 0) {
    fmt::print(stderr,
               "shardtrain: error: stage: {} shard(s) could not be staged (training reads them from the source); "
               "last error: {}\n",
               s.shards_failed, s.last_error);
    return 1;
  }
  return 0;
}

}  // namespace shardtrain::train
