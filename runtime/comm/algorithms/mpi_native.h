// The MPI library's own collectives, for small messages: below a few hundred
// KiB to a few MiB (measured, see CommOptions) Open MPI's tuned algorithms
// (recursive doubling, eager messages) beat a ring, whose per-chunk
// handshakes dominate there.
//
// Sums of bf16 use a user-defined MPI_Op (each hop widens to f32, adds,
// rounds to bf16: reduction.h). Averages are sums scaled afterwards on every
// rank, identically. The communicator runs an ArrivalBarrier first, so that
// by the time they are called every rank is there with the same collective.
//
// Blocking calls, which Open MPI spins in, unless made with a BackoffPolicy:
// then each is the non-blocking call, polled with MPI_Test and the policy's
// backoff. A communicator whose collectives run while another communicator
// of the same process runs its own (HYBRID's groups across nodes) needs
// that: Open MPI 4.1's blocking collectives over TCP stall while another
// thread is in a collective on another communicator, and polled requests do
// not (docs/comm.md).
#pragma once

#include "runtime/comm/engine/scratch.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/dtype.h"

#include <mpi.h>

#include <cstdint>
#include <optional>

namespace shardtrain::comm {

class MpiNative {
 public:
  // `poll`: run each collective as its non-blocking call polled with this
  // policy (null: the blocking call).
  explicit MpiNative(MPI_Comm comm, const BackoffPolicy* poll = nullptr);

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
  // Runs `blocking()`, or with a poll policy `start(&request)` and polls the
  // request it made; both return an MPI error code.
  template <class Blocking, class Start>
  void run(const char* what, Blocking&& blocking, Start&& start);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::optional<BackoffPolicy> poll_;
};

}  // namespace shardtrain::comm
