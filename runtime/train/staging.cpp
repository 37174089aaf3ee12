#include "runtime/train/staging.h"

#include <fmt/format.h>

namespace shardtrain::train {

Staging::Staging(const Config& config, int local_rank) {
  if (!config.io.stage.enabled) return;
  cache_ = std::make_unique<io::ShardCache>(config.data.train, config.io.stage);
  stager_ = local_rank == 0;
  if (stager_) cache_->start();
}

io::ShardLocator Staging::locator() {
  if (!cache_) return {};
  io::ShardCache* cache = cache_.get();
  // path_for marks a shard used (LRU) and returns the copy only while it is
  // cached; the loader asks `cached` first and wants the copy's path.
  if (stager_)
    return {[cache](int i) { return cache->cached(i) && !cache->path_for(i).empty(); },
            [cache](int i) { return cache->cache_path(i); }, [cache](int i, bool p) { cache->pin(i, p); }};
  return {[](int) { return true; }, [cache](int i) { return cache->cache_path(i); }, {}};
}

int64_t Staging::take_bytes() {
  if (!stager_) return 0;
  const int64_t now = cache_->stats().bytes_copied;
  const int64_t delta = now - reported_;
  reported_ = now;
  return delta;
}

std::string Staging::summary() const {
  if (!stager_) return "";
  const io::StageStats s = cache_->stats();
  std::string line = fmt::format(
      "[summary] stage (node of rank 0): copied {:.1f} MB at {:.1f} MB/s into {}; {} of {} shard(s) cached ({} "
      "kept from before), {} evicted, {} checksum failure(s)",
      double(s.bytes_copied) / 1e6, s.rate_mb_s(), cache_->cache_dir(), s.shards_cached,
      cache_->manifest().shards.size(), s.shards_kept, s.shards_evicted, s.checksum_failures);
  if (!s.last_error.empty()) line += fmt::format("; last error: {}", s.last_error);
  return line;
}

}  // namespace shardtrain::train
