// The MPI library's own collectives, for small messages: below a few hundred
// KiB to a few MiB (measured, see CommOptions) Open MPI's tuned algorithms
// (recursive doubling, eager messages) beat a ring, whose per-chunk
// handshakes dominate there.
//
// Sums of bf16 use a user-defined MPI_Op (each hop widens to f32, adds,
// rounds to bf16: reduction.h). Averages are sums scaled afterwards on every
// rank, identically. These are blocking calls on the progress thread, which
// Open MPI spins in; the communicator runs an ArrivalBarrier first, so that
// by the time they are called every rank is there with the same collective.
#pragma once

#include "runtime/comm/engine/scratch.h"
#include "runtime/core/dtype.h"

#include <mpi.h>

#include <cstdint>

namespace shardtrain::comm {

class MpiNative {
 public:
  explicit MpiNative(MPI_Comm comm);

  // In place: buf = sum over ranks * scale.
  void allreduce(void* buf, int64_t numel, DType dtype, float scale);
  // `in`: size() * per_rank elements; `out` (per_rank, may alias in's chunk
  // of this rank) = sum of chunk rank() * scale.
  void reduce_scatter(const void* in, void* out, int64_t per_rank, DType dtype, float scale, Scratch& scratch);
  // `in` (per_rank elements, may be out's chunk rank()) to chunk rank() of `out` on every rank.
  void allgather(const void* in, void* out, int64_t per_rank, DType dtype);
  void broadcast(void* buf, int64_t bytes, int root);
  void barrier();

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace shardtrain::comm
