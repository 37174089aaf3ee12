// The streaming loader: a training split read from its shard files while
// training runs, for data sets larger than memory (data.loader = "stream").
//
// Design (docs/io.md):
// - Parallel HDF5: every rank opens every shard through MPI-IO on its own
//   duplicate of MPI_COMM_WORLD, and reads its slice of each global batch with
//   one H5Dread per run of consecutive samples (its indices sorted and merged
//   into runs), in collective or independent transfer mode. In collective
//   mode every rank joins the read of every shard the global batch touches,
//   with an empty selection when it has nothing there.
// - The read pool (data.read_engine, io/read_pool.h): with independent
//   transfers, the runs are read instead by data.reads_in_flight threads with
//   pread at the file offsets HDF5 reports for /x's chunks, so that a global
//   shuffle keeps the storage busy with many requests, not one.
// - One I/O thread per rank owns every HDF5 call (this HDF5 is built without
//   thread safety): opening, validation, reads, closing. The training thread
//   only takes ready batches from a bounded queue (data.prefetch_batches
//   deep); batch buffers are allocated once and reused, and the step reads
//   its input in the buffer the loader wrote (LoadedBatch::x).
// - The I/O threads of all ranks read the same sequence of batches and, before
//   each collective step (a collective read, reopening staged shards), agree
//   in a small all-reduce whether to go on, so that a rank stopping (end of
//   training, an error) never leaves another waiting in a collective call.
// - cold_cache: after each batch, the shards it touched are dropped from the
//   page cache, so every read goes to storage.
// - Staging (io/cache.h): at each epoch start the ranks agree which shards
//   every node has in its cache and reopen those from there.
#pragma once

#include "io/dataset.h"
#include "io/loader_options.h"
#include "io/sampler.h"
#include "runtime/core/tensor.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shardtrain::io {

// One global batch's slice for this rank, ready for training.
struct LoadedBatch {
  int64_t epoch = 0, batch = 0;
  // f32 [local_batch, sample...], normalized (undefined with options.raw):
  // the step's input itself, read where the loader wrote it (no copy);
  // page-locked with options.pinned_slots, so that a GPU copies from it.
  Tensor x;
  // options.raw: local_batch samples as stored (a language model's token
  // ids, or an emulated accelerator's bytes), with the split's dtype, so
  // that a consumer reads the ids at their width (1, 2 or 4 bytes;
  // lm_batch_from_windows takes samples()). Allocated as tensors are, so
  // that the memory high-water mark counts them.
  struct Raw {
    std::unique_ptr<Storage> storage;
    SampleDType dtype = SampleDType::u8;
    uint8_t* data() const { return static_cast<uint8_t*>(storage->data()); }
    RawSamples samples() const { return {data(), dtype}; }
  } raw;
  std::vector<int32_t> y;  // local_batch
  // What reading it cost (this rank).
  int64_t bytes = 0;       // sample bytes read
  int64_t requests = 0;    // read requests: runs of consecutive samples (with the read pool, cut at chunks)
  int64_t read_calls = 0;  // H5Dread calls (collective: as many as the busiest rank's), or preads
  double read_s = 0;       // wall time of the batch's reads (H5Dread, or the pool's preads)
};

// Cumulative figures of the loader (a snapshot; thread-safe).
struct LoaderStats {
  int64_t batches = 0, bytes = 0, requests = 0;
  double read_s = 0;
  std::string transfer;             // requested: "collective" | "independent"
  std::string read_engine;          // what reads the samples, e.g. "pool, 16 in flight" or "hdf5 (why)"
  std::string actual_io_mode;       // what HDF5 did on this rank's last collective read of samples
  std::string no_collective_cause;  // why not collective, when it was not
  // io.peer_cache.dir (this rank): bytes received from other nodes' ranks
  // (of `bytes`), sent to them, copied from the shared store at start, and
  // fetched from an object store before the loader started (an s3:// split).
  std::string peer_cache;  // "" when off
  int64_t peer_bytes = 0, served_bytes = 0, staged_bytes = 0, fetched_bytes = 0;
};

// Which file to read a shard from: whether this node has it cached, and the
// cached copy's path (io/cache.h's ShardCache; absent: always the source).
// `cached` may mark the shard as used (LRU); `path_for` must return the same
// path on every node (the loader checks that the file is there before the
// collective open).
struct ShardLocator {
  std::function<bool(int)> cached;
  std::function<std::string(int)> path_for;
  // Optional: keeps the stager from evicting a copy (ShardCache::pin) from
  // before the loader checks it until it is no longer read.
  std::function<void(int, bool)> pin;
};

class StreamLoader {
 public:
  // Collective over MPI_COMM_WORLD: every rank constructs it with the same
  // arguments. Validates the split (files, manifest, headers, labels) on every
  // rank and agrees on the outcome: either every rank returns, or every rank
  // throws (with the failing rank's message).
  StreamLoader(std::string split_dir, const LoaderOptions& options, int64_t global_batch, uint64_t seed,
               ShardLocator locator = {});
  ~StreamLoader();  // stops the I/O thread (after agreeing with the other ranks)
  StreamLoader(const StreamLoader&) = delete;
  StreamLoader& operator=(const StreamLoader&) = delete;

  const DatasetInfo& info() const { return info_; }
  int64_t size() const { return info_.num_samples; }
  // The I/O thread draws batches from it: callers may only read its figures
  // (local_batch, batches_per_epoch...); for indices, build an equal Sampler.
  const Sampler& sampler() const;
  std::vector<int64_t> shard_sizes() const { return shard_sizes_; }

  // Starts reading `count` batches from `from` (epoch, batch) on, in order.
  void start(SamplerPosition from, int64_t count);
  // The next batch, waiting for it if it is not ready (that wait is the
  // storage stall). Valid until the call after the following one: the
  // consumer holds two slots, the step's and the one before, whose copy to
  // a GPU may still run until the step after it starts (kHeldBatches).
  // Rethrows an I/O error.
  const LoadedBatch& next();
  static constexpr int kHeldBatches = 2;
  // Ready batches in the queue now (before next() takes one).
  int64_t queued() const;
  LoaderStats stats() const;

 private:
  struct Impl;
  // The I/O thread's body: it touches only Impl (which the destructor leaks
  // when an exception unwinds a multi-rank job, see there).
  static void io_main(Impl& m, SamplerPosition from, int64_t count);

  DatasetInfo info_;
  std::vector<int64_t> shard_sizes_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace shardtrain::io
