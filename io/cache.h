// Cache staging: copying a split's shard files from where they live (a shared
// file system, or an S3 object store: an s3:// source) into a local cache
// directory, in the background while training runs, at a limited rate and
// block size; each copy is checked against the manifest's checksum before it
// is used; least recently used shards are evicted past a capacity. The loader
// asks `path_for` which file to read for a shard: the cached copy once it is
// there and verified, the source otherwise. `shardtrain stage` runs the same
// copier alone, to stage the next job's data. docs/io.md.
#pragma once

#include "io/loader_options.h"
#include "io/manifest.h"
#include "io/rate_limiter.h"
#include "io/s3/client.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shardtrain::io {

struct CopyStats {
  int64_t bytes = 0;      // bytes written
  double seconds = 0;     // wall time of the whole copy (open to rename)
  bool complete = false;  // false: stopped early, nothing left behind
};

// Copies `src` to `dst` (written as dst + ".tmp", fsync'ed, renamed over dst;
// dst's directory is created), in reads and writes of `block_bytes`, through
// `limiter` (may be null: unlimited). Stops early, removing the temp file,
// when `stop` becomes true (returns what was copied, complete = false). On an
// error the temp file is removed too; errors name the file. `direct`: reads
// and writes with O_DIRECT (blocks of whole 4 KiB), past the page cache, so
// that a copy beside training neither evicts the job's pages nor leaves
// dirty ones for writeback; a file system without O_DIRECT is an error.
CopyStats copy_file_limited(const std::string& src, const std::string& dst, int64_t block_bytes, RateLimiter* limiter,
                            const std::atomic<bool>* stop = nullptr, bool direct = false);

struct StageStats {
  int64_t bytes_copied = 0;   // so far (completed copies, including ones that failed verification)
  double copy_seconds = 0;    // time spent copying
  int64_t shards_cached = 0;  // verified copies present now
  int64_t shards_kept = 0;    // of those, found already in the cache (a restarted stage)
  int64_t shards_evicted = 0;
  int64_t checksum_failures = 0;  // copies that did not match (removed; each shard retried once)
  int64_t shards_failed = 0;      // shards given up on (two failed copies): read from the source
  int64_t store_requests = 0;     // an s3:// source: HTTP requests, retries included
  int64_t store_retries = 0;      // of those, repeats after a transient failure
  bool done = false;              // every shard in the order handled (not stopped)
  std::string last_error;         // the last failure's message ("" if none)
  double rate_mb_s() const { return copy_seconds > 0 ? double(bytes_copied) / copy_seconds / 1e6 : 0; }
};

// start, stop, wait and run are called by the owner (one thread); path_for,
// cached, stats and the accessors from any thread.
class ShardCache {
 public:
  using Log = std::function<void(const std::string&)>;

  // `source_dir`: a split directory with a manifest.json (required: the
  // checksums come from it), or an s3:// prefix holding the same files
  // (read with options.s3's client; a source path is then an s3:// URL,
  // which only the copier reads). Copies go to <cache_dir>/<source's last
  // name>/ (created). Capacity in GB = 10^9 bytes, rate in MB/s = 10^6 bytes/s.
  ShardCache(std::string source_dir, StageOptions options);
  ~ShardCache();  // stops the copier
  ShardCache(const ShardCache&) = delete;
  ShardCache& operator=(const ShardCache&) = delete;

  const Manifest& manifest() const { return manifest_; }
  const std::string& source_dir() const { return source_dir_; }
  bool remote() const { return store_ != nullptr; }            // an s3:// source
  std::string store_description() const;                       // "" for a directory
  const std::string& cache_dir() const { return cache_dir_; }  // <cache_dir>/<source dir's name>
  // The same path without a cache (no manifest read, nothing created).
  static std::string cache_dir_for(const std::string& source_dir, const std::string& cache_dir);

  // Starts copying in a background thread, shards in `order` (indices into
  // the manifest's shards; empty: manifest order). Shards already in the
  // cache and matching the manifest (size; checksum when options.verify) are
  // kept without copying. `log` (may be empty) gets a line per shard, from
  // the copier thread. A previous start's copier is stopped first. Failures
  // are never thrown: they are counted and remembered in stats().
  void start(std::vector<int> order = {}, Log log = {});
  // Stops the copier (an unfinished copy leaves nothing behind) and joins it.
  void stop();
  // Waits for the copier to finish its order.
  void wait();
  // Copies the shards in `order` (empty: all of them) in the calling thread
  // (for `shardtrain stage`, and an s3:// split's fetch before training);
  // `progress` gets a line per shard.
  StageStats run(const Log& progress = {}, std::vector<int> order = {});

  // The file to read for shard `index` now; marks it used (LRU). Never
  // returns a partial or unverified copy. Thread-safe.
  std::string path_for(int index);
  bool cached(int index) const;
  // A pinned copy is never evicted: the loader pins a shard before it checks
  // that the copy is there on every rank and keeps it pinned while it reads
  // the copy. Evicting a copy the loader holds open would free no disk space
  // (the file lives on, unlinked, until closed) and, between the check and
  // the collective open, would leave the ranks in different calls. When the
  // unpinned copies cannot make room for a shard, it stays on the source.
  void pin(int index, bool pinned);
  StageStats stats() const;
  // Where shard `index` is in the source / would be in the cache (no check,
  // no LRU mark). The cache path is the same string on every node that uses
  // the same cache_dir.
  std::string source_path(int index) const;
  std::string cache_path(int index) const;

 private:
  void copy_loop(const std::vector<int>& order, const Log& log);
  bool stage_one(int index, const Log& log);       // copy + verify (+ one retry); false if it failed
  bool adopt_existing(int index, const Log& log);  // a valid copy already in the cache
  enum class Room { fits, too_large, in_use };
  Room evict_for(int index, int64_t incoming_bytes, const Log& log);
  void remove_stale_temp_files();  // left by a killed copier; the copier's own start only
  void mark_cached(int index, bool kept);
  void check_index(int index) const;
  std::vector<int> checked_order(std::vector<int> order) const;  // empty: every shard

  std::string source_dir_, cache_dir_;
  StageOptions options_;
  std::unique_ptr<S3Client> store_;  // an s3:// source
  Log store_log_;                    // the copier's log while it runs, for the client's retry lines
  Manifest manifest_;
  RateLimiter limiter_;
  mutable std::mutex mu_;
  std::vector<bool> cached_, pinned_;
  std::vector<uint64_t> last_used_;  // LRU clock per shard (set when cached, then by path_for)
  uint64_t clock_ = 0;
  int64_t cached_bytes_ = 0;
  StageStats stats_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace shardtrain::io
