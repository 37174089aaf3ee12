// The Communicator: collectives over a group of ranks, each returning a Work
// that completes asynchronously. Every rank of the group must issue the same
// collectives in the same order (as with MPI); a backend executes them strictly
// in issue order, off the caller's thread (a progress engine on CPU, a
// communication stream on GPU).
//
// Buffers are Tensors (views into flat buffers, usually): they must stay alive
// and untouched until the Work completes. Reductions: f32 and bf16 (bf16
// accumulates each hop in f32 and rounds to bf16). allgather and broadcast
// also move i32. Results are deterministic: the same inputs on the same ranks
// give the same bits, on every rank.
#pragma once

#include "runtime/comm/work.h"
#include "runtime/core/tensor.h"

#include <cstdint>
#include <memory>
#include <string>

namespace shardtrain::comm {

enum class ReduceOp { sum, avg };

// Tunables of the MPI backend (config section [comm]).
struct CommOptions {
  // Messages up to this size go through the MPI library's own collective;
  // larger ones through shardtrain's pipelined chunked ring.
  int64_t small_message_bytes = 64 << 10;
  // Chunk size of the ring's pipeline.
  int64_t chunk_bytes = 256 << 10;
  // "auto" (by size, hierarchical when there are several nodes with several
  // ranks each), or force "mpi", "ring" or "hierarchical".
  std::string allreduce_algorithm = "auto";
  // A collective not complete after this long ends the job with a message
  // naming the operation, its sequence number, its size and the ranks that
  // never arrived.
  double timeout_s = 300.0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // "world", "node", "cross-node"

  // In place over `t` on every rank.
  virtual WorkPtr allreduce(const Tensor& t, ReduceOp op) = 0;
  // `in` holds size() equal chunks; rank r receives the reduction of chunk r
  // into `out` (numel = in.numel() / size()). `out` may be `in`'s chunk r.
  virtual WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  // Rank r's `in` lands at chunk r of `out` (numel = size() * in.numel()) on
  // every rank. `in` may be `out`'s chunk r.
  virtual WorkPtr allgather(const Tensor& in, const Tensor& out) = 0;
  virtual WorkPtr broadcast(const Tensor& t, int root) = 0;
  virtual WorkPtr barrier() = 0;

  // Sub-communicators for hierarchical algorithms and hybrid sharding: the
  // ranks of this rank's node, and the ranks with this rank's node-local
  // index across nodes. Created once, owned by this communicator.
  virtual Communicator& node() = 0;
  virtual Communicator& cross_node() = 0;
};

// The MPI backend over a duplicate of MPI_COMM_WORLD (name "world"). MPI must
// be initialized with MPI_THREAD_MULTIPLE (comm::MpiEnv does).
std::unique_ptr<Communicator> make_mpi_world_communicator(const CommOptions& options);

}  // namespace shardtrain::comm
