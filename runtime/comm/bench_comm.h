// `shardtrain bench comm`: shardtrain's collectives against the MPI library's
// own, in the same run, under mpirun. Methodology of nccl-tests: per op and
// size, `iters` operations issued back to back and the last one waited for
// (shardtrain: the progress engine's hand-off is amortized) versus a loop of
// `iters` blocking MPI calls; the two alternate round by round (cancelling
// drift on noisy machines) and the median round is reported. Every result is
// checked against the expected values. Sizes: "bytes" is the full buffer as
// nccl-tests count it (all-reduce and broadcast: the buffer; reduce-scatter:
// the input; all-gather: the output); algbw = bytes / time; busbw = algbw *
// 2(n-1)/n (all-reduce), (n-1)/n (reduce-scatter, all-gather), 1 (broadcast).
#pragma once

#include "runtime/comm/communicator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::comm {

struct BenchCommOptions {
  int64_t min_bytes = 4 << 10, max_bytes = int64_t(256) << 20;  // powers of 2 in between
  std::vector<std::string> ops = {"allreduce", "reduce_scatter", "allgather", "broadcast"};
  int iters = 0;     // operations per timed round; 0: as many as fill ~50 ms (at least 1)
  int warmup = 2;    // untimed operations per implementation and size
  int rounds = 5;    // timed rounds per implementation (alternating); the median is reported
  std::string dtype = "f32";  // "f32" | "bf16"
  std::string json_path;      // if set, rank 0 writes every row there (a JSON array)
  CommOptions comm;
};

// Run on every rank of MPI_COMM_WORLD (MPI initialized with
// MPI_THREAD_MULTIPLE); rank 0 prints the table. Returns 0, or 1 on every
// rank if any result was wrong.
int bench_comm(const BenchCommOptions& options);

}  // namespace shardtrain::comm
