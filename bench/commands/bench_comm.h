// `shardtrain bench comm`: shardtrain's collectives against the MPI library's
// own, in the same run, under mpirun. Per op and size, `iters` operations of
// each implementation, timed in rounds that alternate between the two
// (cancelling drift on noisy machines); the median round is reported. Every
// result is checked against the expected values.
//
// Two modes, named in the header and in every JSON row, because they measure
// different things:
// - throughput (the default, as nccl-tests do): shardtrain's `iters`
//   operations are issued back to back and the last one waited for, so the
//   progress engine's hand-off is amortized, and small all-reduces already
//   queued behind each other may be coalesced into one exchange (as DDP's
//   buckets are); MPI's are `iters` blocking calls, which cannot overlap.
// - latency: issue one operation, wait for it, repeat: nothing is queued, so
//   nothing is coalesced, and every hand-off to the engine and back counts.
// Both cycle through `buffers` distinct buffers (up to 1 MiB in all, at most
// 16), the same for both implementations: operations on distinct buffers are
// what a caller can have in flight at once (one buffer all-reduced twice in a
// row is a dependency, never coalesced).
//
// Busy threads: with busy_threads > 0, each rank runs that many threads of
// f32 GEMMs (the training step's own kernel) while the warm-up and the timed
// rounds run, so the collectives compete for the cores with compute. That
// bounds from above what a collective costs in a CPU training step, where
// the rank computes for only part of the time its collectives are in flight
// (docs/BENCHMARKS.md, "Collectives in a training step against the same
// collectives alone"); on idle cores it is what it costs alone.
//
// Sizes: powers of 2 from min_bytes to max_bytes, or the list given.
// "bytes" is one buffer as nccl-tests count it (all-reduce and
// broadcast: the buffer; reduce-scatter: the input; all-gather: the output);
// algbw = bytes / time; busbw = algbw * 2(n-1)/n (all-reduce), (n-1)/n
// (reduce-scatter, all-gather), 1 (broadcast).
#pragma once

#include "runtime/comm/communicator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::comm {

struct BenchCommOptions {
  int64_t min_bytes = 4 << 10, max_bytes = int64_t(256) << 20;  // powers of 2 in between
  // Instead of the powers of 2: these sizes, in this order (a model's own
  // buckets and Blocks: `shardtrain study` measures the sizes it predicts).
  std::vector<int64_t> sizes;
  std::vector<std::string> ops = {"allreduce", "reduce_scatter", "allgather", "broadcast"};
  int iters = 0;                    // operations per timed round; 0: as many as fill ~50 ms (at least 1)
  int warmup = 2;                   // untimed operations per implementation and size
  int rounds = 5;                   // timed rounds per implementation (alternating); the median is reported
  std::string dtype = "f32";        // "f32" | "bf16"
  std::string mode = "throughput";  // "throughput" | "latency" | "both" (see above)
  int busy_threads = 0;             // GEMM threads per rank while timing (see above)
  std::string json_path;            // if set, rank 0 writes every row there (a JSON array)
  // Where the collectives run: "world", or every node's ranks ("node") or
  // the ranks with the same node-local index ("cross"), all groups at once,
  // as HYBRID's shard and replica groups run in a step. Times are the
  // slowest group's.
  std::string group = "world";
  // Instead of shardtrain against MPI: every algorithm of each op and size,
  // the fastest kept in a tuning file (bench_comm_tune.cpp): tune_file, or
  // the cache of this topology where comm.tuning = "auto" looks.
  bool tune = false;
  std::string tune_file;
  CommOptions comm;
};

// Run on every rank of MPI_COMM_WORLD (MPI initialized with
// MPI_THREAD_MULTIPLE); rank 0 prints the table. Returns 0, or 1 on every
// rank if any result was wrong.
int bench_comm(const BenchCommOptions& options);
// bench_comm with options.tune.
int bench_comm_tune(const BenchCommOptions& options);

}  // namespace shardtrain::comm
