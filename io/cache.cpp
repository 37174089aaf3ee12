// ShardCache: stages a split's shards into a local cache directory, verifies
// them against the manifest and evicts the least recently used (io/cache.h).
#include "io/cache.h"
#include "runtime/core/error.h"

#include <fmt/format.h>

#include <filesystem>
#include <numeric>
#include <utility>

namespace fs = std::filesystem;

namespace shardtrain::io {
namespace {

void emit(const ShardCache::Log& log, const std::string& line) {
  if (log) log(line);
}

double mb(int64_t bytes) { return double(bytes) / 1e6; }

void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

// The cache subdirectory's name: the source split directory's own name
// ("data/fm/train/" -> "train", "s3://bucket/fm/train" -> "train").
std::string split_dir_name(const std::string& source_dir) {
  if (is_s3_url(source_dir)) {
    const S3Location where = parse_s3_url(source_dir);
    std::string key = where.key;
    while (!key.empty() && key.back() == '/') key.pop_back();
    const size_t slash = key.rfind('/');
    return key.empty() ? where.bucket : key.substr(slash == std::string::npos ? 0 : slash + 1);
  }
  fs::path p = fs::absolute(fs::path(source_dir)).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::string name = p.filename().string();
  ST_CHECK(!name.empty() && name != "." && name != "..", "{}: cannot name a cache directory after it", source_dir);
  return name;
}

}  // namespace

ShardCache::ShardCache(std::string source_dir, StageOptions options)
    : source_dir_(std::move(source_dir)), options_(std::move(options)), limiter_(options_.rate_mb_s * 1e6) {
  ST_CHECK(!options_.cache_dir.empty(), "io.stage.cache_dir is empty: give a local directory for the cache");
  validate(options_);
  if (is_s3_url(source_dir_)) {
    // Retry lines go to the copier's log; before it runs (the manifest's
    // GET), to stderr: a store that needs retries should be seen.
    store_ = std::make_unique<S3Client>(options_.s3, [this](const std::string& line) {
      if (store_log_)
        store_log_(line);
      else
        fmt::print(stderr, "[s3] {}\n", line);
    });
    const std::string url = s3_child(source_dir_, kManifestFile);
    manifest_ = parse_manifest(
        with_context(fmt::format("{} (the stager checks every object against it: `shardtrain upload` writes it)", url),
                     [&] { return store_->get_text(url); }),
        url);
  } else {
    ST_CHECK(fs::is_directory(source_dir_), "{}: not a directory (give the split directory to stage)", source_dir_);
    std::optional<Manifest> m = read_manifest(source_dir_);
    ST_CHECK(m.has_value(),
             "{}: no {} (the stager checks every copy against it): run `shardtrain prep manifest {}` first",
             source_dir_, kManifestFile, source_dir_);
    manifest_ = std::move(*m);
  }
  for (const ManifestShard& s : manifest_.shards) {
    ST_CHECK(!s.file.empty() && s.file.find('/') == std::string::npos && s.file != "." && s.file != "..",
             "{}/{}: shard file name \"{}\" is not a plain file name", source_dir_, kManifestFile, s.file);
  }

  cache_dir_ = cache_dir_for(source_dir_, options_.cache_dir);
  std::error_code ec;
  fs::create_directories(cache_dir_, ec);
  ST_CHECK(!ec, "{}: cannot create the cache directory: {}", cache_dir_, ec.message());
  ST_CHECK(store_ || !fs::equivalent(cache_dir_, source_dir_, ec),
           "{}: the cache directory is the source split directory itself", cache_dir_);

  cached_.assign(manifest_.shards.size(), false);
  pinned_.assign(manifest_.shards.size(), false);
  last_used_.assign(manifest_.shards.size(), 0);
}

ShardCache::~ShardCache() { stop(); }

std::string ShardCache::cache_dir_for(const std::string& source_dir, const std::string& cache_dir) {
  return (fs::path(cache_dir) / split_dir_name(source_dir)).string();
}

void ShardCache::check_index(int index) const {
  ST_CHECK(index >= 0 && size_t(index) < manifest_.shards.size(), "shard {} is not in {} ({} shards)", index,
           source_dir_, manifest_.shards.size());
}

std::string ShardCache::cache_path(int index) const {
  check_index(index);
  return (fs::path(cache_dir_) / manifest_.shards[size_t(index)].file).string();
}

std::string ShardCache::source_path(int index) const {
  check_index(index);
  if (store_) return s3_child(source_dir_, manifest_.shards[size_t(index)].file);
  return (fs::path(source_dir_) / manifest_.shards[size_t(index)].file).string();
}

std::string ShardCache::store_description() const { return store_ ? store_->describe() : std::string(); }

// Copies interrupted by a crash or a kill leave <shard>.tmp behind (a stop
// removes its own); they are not counted against the capacity, so the one
// copier of this cache directory removes them before it starts. (Only the
// copier: other ranks construct a ShardCache for its paths and must not touch
// files the copier may be writing.)
void ShardCache::remove_stale_temp_files() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cache_dir_, ec)) {
    if (entry.path().extension() != ".tmp") continue;
    std::error_code rm;
    fs::remove(entry.path(), rm);
  }
}

std::vector<int> ShardCache::checked_order(std::vector<int> order) const {
  const int n = int(manifest_.shards.size());
  if (order.empty()) {
    order.resize(size_t(n));
    std::iota(order.begin(), order.end(), 0);
  }
  for (int i : order) ST_CHECK(i >= 0 && i < n, "stage order: shard {} is not in {} ({} shards)", i, source_dir_, n);
  return order;
}

void ShardCache::start(std::vector<int> order, Log log) {
  stop();
  remove_stale_temp_files();
  order = checked_order(std::move(order));
  stop_.store(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.done = false;
  }
  thread_ = std::thread([this, order = std::move(order), log = std::move(log)] { copy_loop(order, log); });
}

void ShardCache::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ShardCache::wait() {
  if (thread_.joinable()) thread_.join();
}

StageStats ShardCache::run(const Log& progress, std::vector<int> order) {
  stop();
  remove_stale_temp_files();
  order = checked_order(std::move(order));
  stop_.store(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.done = false;
  }
  copy_loop(order, progress);
  return stats();
}

void ShardCache::copy_loop(const std::vector<int>& order, const Log& log) {
  store_log_ = log;
  const size_t n = order.size();
  for (size_t k = 0; k < n && !stop_.load(); ++k) {
    const int index = order[k];
    const Log shard_log = [&](const std::string& line) {
      emit(log, fmt::format("{}/{} {}: {}", k + 1, n, manifest_.shards[size_t(index)].file, line));
    };
    try {
      stage_one(index, shard_log);
    } catch (const std::exception& e) {  // never into training: remembered, reported
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.shards_failed;
      stats_.last_error = e.what();
      emit(shard_log, fmt::format("failed, read from the source: {}", e.what()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.done = !stop_.load();
}

bool ShardCache::stage_one(int index, const Log& log) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_[size_t(index)]) return true;
  }
  const ManifestShard& shard = manifest_.shards[size_t(index)];
  const std::string dst = cache_path(index);
  const Room room = evict_for(index, shard.bytes, log);
  if (room != Room::fits) {
    remove_quietly(dst);
    emit(log, room == Room::too_large
                  ? fmt::format("{:.1f} MB is more than the cache's capacity ({} GB): read from the source",
                                mb(shard.bytes), options_.capacity_gb)
                  : fmt::format("no room within {} GB: the cached copies are in use by the loader; read from "
                                "the source",
                                options_.capacity_gb));
    return true;
  }
  if (adopt_existing(index, log)) return true;

  for (int attempt = 1; attempt <= 2; ++attempt) {
    if (stop_.load()) return true;
    CopyStats cs;
    try {
      if (store_) {
        const S3Transfer t = store_->download(source_path(index), shard.bytes, dst, &limiter_, &stop_);
        cs = {t.bytes, t.seconds, t.complete};
        std::lock_guard<std::mutex> lock(mu_);
        stats_.store_requests += t.requests;
        stats_.store_retries += t.retries;
      } else {
        cs = copy_file_limited(source_path(index), dst, options_.block_kib * 1024, &limiter_, &stop_,
                               options_.direct_io);
      }
    } catch (const std::exception& e) {
      remove_quietly(dst);
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.last_error = e.what();
      }
      emit(log, fmt::format("copy failed (attempt {} of 2): {}", attempt, e.what()));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_copied += cs.bytes;
      stats_.copy_seconds += cs.seconds;
    }
    if (!cs.complete) return true;  // stopped
    try {
      if (options_.verify) {
        verify_shard(dst, shard);
      } else {
        ST_CHECK(cs.bytes == shard.bytes, "{}: {} bytes, the manifest says {}", dst, cs.bytes, shard.bytes);
      }
    } catch (const std::exception& e) {
      remove_quietly(dst);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (options_.verify) ++stats_.checksum_failures;
        stats_.last_error = e.what();
      }
      emit(log, fmt::format("copy does not match the manifest (attempt {} of 2), removed: {}", attempt, e.what()));
      continue;
    }
    mark_cached(index, false);
    emit(log, fmt::format("copied {:.2f} MB in {:.2f} s ({:.1f} MB/s)", mb(cs.bytes), cs.seconds,
                          cs.seconds > 0 ? mb(cs.bytes) / cs.seconds : 0.0));
    return true;
  }
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.shards_failed;
    error = stats_.last_error;
  }
  emit(log, fmt::format("gave up after 2 attempts, read from the source: {}", error));
  return false;
}

bool ShardCache::adopt_existing(int index, const Log& log) {
  const ManifestShard& shard = manifest_.shards[size_t(index)];
  const std::string dst = cache_path(index);
  std::error_code ec;
  const auto size = fs::file_size(dst, ec);
  if (ec) return false;  // not there
  if (int64_t(size) != shard.bytes) {
    emit(log,
         fmt::format("a copy of {} bytes is in the cache, the manifest says {}: copying again", size, shard.bytes));
    remove_quietly(dst);
    return false;
  }
  if (options_.verify) {
    try {
      verify_shard(dst, shard);
    } catch (const std::exception& e) {
      emit(log, fmt::format("the copy in the cache does not match the manifest, copying again: {}", e.what()));
      remove_quietly(dst);
      return false;
    }
  }
  mark_cached(index, true);
  emit(log, options_.verify ? "already in the cache (checksum verified), kept"
                            : "already in the cache (size matches), kept");
  return true;
}

ShardCache::Room ShardCache::evict_for(int index, int64_t incoming_bytes, const Log& log) {
  if (options_.capacity_gb <= 0) return Room::fits;
  const double capacity = options_.capacity_gb * 1e9;
  if (double(incoming_bytes) > capacity) return Room::too_large;
  std::vector<int> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Evict nothing unless the unpinned copies can make room.
    int64_t evictable = 0;
    for (size_t j = 0; j < cached_.size(); ++j)
      if (cached_[j] && !pinned_[j] && int(j) != index) evictable += manifest_.shards[j].bytes;
    if (double(cached_bytes_ - evictable + incoming_bytes) > capacity) return Room::in_use;
    while (double(cached_bytes_ + incoming_bytes) > capacity) {
      int victim = -1;
      for (size_t j = 0; j < cached_.size(); ++j) {
        if (!cached_[j] || pinned_[j] || int(j) == index) continue;
        if (victim < 0 || last_used_[j] < last_used_[size_t(victim)]) victim = int(j);
      }
      if (victim < 0) break;  // cannot happen: the unpinned copies make room
      // From here on path_for returns the source for it: removing the file is safe.
      cached_[size_t(victim)] = false;
      cached_bytes_ -= manifest_.shards[size_t(victim)].bytes;
      --stats_.shards_cached;
      ++stats_.shards_evicted;
      victims.push_back(victim);
    }
  }
  for (int v : victims) {
    remove_quietly(cache_path(v));
    emit(log, fmt::format("evicted {} (least recently used) to stay within {} GB", manifest_.shards[size_t(v)].file,
                          options_.capacity_gb));
  }
  return Room::fits;
}

void ShardCache::pin(int index, bool pinned) {
  check_index(index);
  std::lock_guard<std::mutex> lock(mu_);
  pinned_[size_t(index)] = pinned;
}

void ShardCache::mark_cached(int index, bool kept) {
  std::lock_guard<std::mutex> lock(mu_);
  cached_[size_t(index)] = true;
  last_used_[size_t(index)] = ++clock_;
  cached_bytes_ += manifest_.shards[size_t(index)].bytes;
  ++stats_.shards_cached;
  if (kept) ++stats_.shards_kept;
}

std::string ShardCache::path_for(int index) {
  check_index(index);
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_[size_t(index)]) {
    last_used_[size_t(index)] = ++clock_;
    return cache_path(index);
  }
  return source_path(index);
}

bool ShardCache::cached(int index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index >= 0 && size_t(index) < cached_.size() && cached_[size_t(index)];
}

StageStats ShardCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace shardtrain::io
