// How the training split is read ([data] in the config, docs/config.md):
// held in memory, or streamed from the shard files by the parallel HDF5
// loader with prefetching (io/stream_loader.h).
#pragma once

#include "runtime/core/enum_names.h"

#include <array>
#include <cstdint>
#include <string>

namespace shardtrain::io {

enum class LoaderMode { memory, stream };
enum class Transfer { independent, collective };  // HDF5 MPI-IO transfer of the stream loader
enum class SampleOrder { global, shard };         // a global shuffle, or shards in order then a window
enum class LastBatch { drop, pad };               // the last partial global batch of an epoch
// How the stream loader reads samples: a pool of readers with many reads in
// flight on the offsets HDF5 reports (io/read_pool.h), or one H5Dread at a
// time through MPI-IO. auto: the pool where it can (independent transfers,
// shards whose /x bytes are the samples), else HDF5.
enum class ReadEngine { automatic, pool, hdf5 };
// Whether the read pool reads with O_DIRECT, past the page cache. auto: in a
// global shuffle where every epoch is meant to come from storage
// (cold_cache) or the split is larger than the node's memory: there the
// cache only costs (a copy in, an eviction out) and holds nothing read
// again, and readahead is no help.
enum class DirectIo { automatic, on, off };

inline std::span<const EnumName<LoaderMode>> enum_names(LoaderMode) {
  static constexpr std::array<EnumName<LoaderMode>, 2> n = {
      {{LoaderMode::memory, "memory"}, {LoaderMode::stream, "stream"}}};
  return n;
}
inline std::span<const EnumName<Transfer>> enum_names(Transfer) {
  static constexpr std::array<EnumName<Transfer>, 2> n = {
      {{Transfer::independent, "independent"}, {Transfer::collective, "collective"}}};
  return n;
}
inline std::span<const EnumName<SampleOrder>> enum_names(SampleOrder) {
  static constexpr std::array<EnumName<SampleOrder>, 2> n = {
      {{SampleOrder::global, "global"}, {SampleOrder::shard, "shard"}}};
  return n;
}
inline std::span<const EnumName<ReadEngine>> enum_names(ReadEngine) {
  static constexpr std::array<EnumName<ReadEngine>, 3> n = {
      {{ReadEngine::automatic, "auto"}, {ReadEngine::pool, "pool"}, {ReadEngine::hdf5, "hdf5"}}};
  return n;
}
inline std::span<const EnumName<DirectIo>> enum_names(DirectIo) {
  static constexpr std::array<EnumName<DirectIo>, 3> n = {
      {{DirectIo::automatic, "auto"}, {DirectIo::on, "on"}, {DirectIo::off, "off"}}};
  return n;
}
inline std::span<const EnumName<LastBatch>> enum_names(LastBatch) {
  static constexpr std::array<EnumName<LastBatch>, 2> n = {{{LastBatch::drop, "drop"}, {LastBatch::pad, "pad"}}};
  return n;
}

struct LoaderOptions {
  LoaderMode mode = LoaderMode::memory;
  int64_t prefetch_batches = 4;                    // stream: ready batches queued ahead of training
  Transfer transfer = Transfer::independent;       // stream (docs/io.md)
  bool cold_cache = false;                         // stream: drop the shards' pages after reading them
  ReadEngine read_engine = ReadEngine::automatic;  // stream (docs/io.md)
  int64_t reads_in_flight = 16;                    // stream, read pool: its threads (reads in flight per rank)
  DirectIo direct_io = DirectIo::automatic;        // stream, read pool: O_DIRECT reads, past the page cache
  bool verify_checksums = true;                    // check the shards against manifest.json's CRC-32s (docs/io.md)
  bool verify_files = true;                        // stream: ... by reading each shard whole at start
  SampleOrder order = SampleOrder::global;         // sampler
  int64_t shuffle_window = 0;                      // order = shard: samples shuffled together (0: one shard)
  LastBatch last_batch = LastBatch::drop;          // sampler
  // stream, read pool: a cache tier shared by the job's nodes (io/peer_cache.h):
  // each node holds every N-th shard in this node-local directory ("%h": the
  // host name, "%n": the node's index), staged once from data.train; a shard
  // another node holds is read from it over MPI. Empty: off.
  std::string peer_cache_dir;
  int64_t peer_ranks_per_node = 0;  // 0: the ranks sharing memory are a node (MPI's view)
  // stream, peer cache: the split directory is this node's part of the peer
  // cache, fetched from an object store: its manifest lists every shard, but
  // only the shards this node holds are there; each of the others is known
  // from the node that holds it (io/peer_metadata.h). Set by the trainer for
  // an s3:// split, not a config key.
  bool peer_sparse_split = false;
  // With peer_sparse_split: the bytes this rank fetched from the object
  // store into its node's part (its node's first rank; 0 on the others),
  // for the loader's figures. Set by the trainer, not a config key.
  int64_t peer_fetched_bytes = 0;
  // stream: deliver the samples' stored bytes (LoadedBatch::raw) instead of
  // normalized floats: token ids of text data. Set by the trainer for a
  // language model, not a config key.
  bool raw = false;
  // stream: page-locked batch slots, which a GPU copies from without
  // staging. Set by the trainer for runtime.device = "cuda", not a config key.
  bool pinned_slots = false;
};

// An S3 object store as a split's source (data.train = "s3://bucket/prefix",
// [io.s3], io/s3/client.h). Keys come from the environment or the AWS files.
struct S3Options {
  std::string endpoint;     // "" : AWS_ENDPOINT_URL(_S3), the AWS config file, else AWS's own
  std::string region;       // "" : AWS_REGION, the AWS config file, else us-east-1
  int64_t connections = 4;  // ranged GETs in flight per object
  int64_t part_mib = 8;     // bytes per ranged GET
  int64_t retries = 6;      // per request after the first try (exponential backoff)
};

// Copying shards from where they live (the shared store) to a local cache
// directory while training runs ([io.stage], io/cache.h).
struct StageOptions {
  bool enabled = false;
  std::string cache_dir;     // local directory (created); shards land in <cache_dir>/<split dir name>/
  double rate_mb_s = 0;      // copy rate limit in MB/s (10^6 bytes); 0 = unlimited
  int64_t block_kib = 1024;  // write block size
  double capacity_gb = 0;    // evict least recently used shards past this (0 = unlimited)
  bool verify = true;        // check each copy against the manifest's checksum
  bool direct_io = false;    // copy with O_DIRECT, past the page cache (block_kib whole 4 KiB blocks)
  S3Options s3;              // where the source is an s3:// prefix
};

// An Error naming the [data] or [io.stage] key out of range, or a
// combination the loader refuses.
void validate(const LoaderOptions& options);
void validate(const StageOptions& options);
void validate(const S3Options& options);

}  // namespace shardtrain::io
