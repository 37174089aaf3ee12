// The Communicator: collectives over a group of ranks, each returning a Work
// that completes asynchronously. Every rank of the group must issue the same
// collectives in the same order (as with MPI); a backend executes them strictly
// in issue order, off the caller's thread (a progress engine on CPU, a
// communication stream on GPU).
//
// Buffers are Tensors (views into flat buffers, usually): they must stay
// untouched (not read for an in-place result, not written) until the Work
// completes; the backend holds a reference to their storage until then, so
// dropping the caller's Tensor early is safe. Reductions: f32 and bf16 (bf16
// accumulates each hop in f32 and rounds to bf16); an average is the sum
// times 1/size(). allgather and broadcast also move i32. reduce_scatter only
// reads its input (unless out aliases it). Results are deterministic: the
// same inputs on the same ranks give the same bits, on every rank.
//
// Costs (MPI backend): issuing is a queue push on the caller's thread; a
// thread per communicator actually used (plus the watchdog's, which wakes
// every 10 ms). While data moves the progress thread uses a core; idle it
// sleeps (after a short poll only when collectives come back to back); while
// it waits for a late rank it sleeps in growing steps, including before
// MPI's own collectives (which would otherwise spin at 100%). A caller that
// waits for a collective nothing has started yet runs it on its own thread
// (Work::wait), which saves the hand-off to the engine and back. The figures
// behind these choices: docs/BENCHMARKS.md, "Where the communicator's defaults come from".
// Errors in arguments throw shardtrain::Error on the caller's thread, before
// anything is issued; a collective that fails or hangs ends the job with the
// watchdog's report (CommOptions::timeout_s).
#pragma once

#include "runtime/core/enum_names.h"

#include "runtime/comm/work.h"
#include "runtime/core/tensor.h"

#include <cstdint>
#include <memory>
#include <string>

namespace shardtrain::comm {

enum class ReduceOp { sum, avg };

enum class AllreduceAlgorithm { automatic, shm, oneshot, mpi, ring, hierarchical };
inline std::span<const EnumName<AllreduceAlgorithm>> enum_names(AllreduceAlgorithm) {
  using A = AllreduceAlgorithm;
  static constexpr std::array<EnumName<A>, 6> n = {{{A::automatic, "auto"},
                                                    {A::shm, "shm"},
                                                    {A::oneshot, "oneshot"},
                                                    {A::mpi, "mpi"},
                                                    {A::ring, "ring"},
                                                    {A::hierarchical, "hierarchical"}}};
  return n;
}
// GPU tensors: NCCL when libnccl.so.2 loads on every rank (auto), NCCL, or
// MPI with device buffers.
enum class GpuBackend { automatic, nccl, mpi };
inline std::span<const EnumName<GpuBackend>> enum_names(GpuBackend) {
  static constexpr std::array<EnumName<GpuBackend>, 3> n = {
      {{GpuBackend::automatic, "auto"}, {GpuBackend::nccl, "nccl"}, {GpuBackend::mpi, "mpi"}}};
  return n;
}

// Tunables of the MPI backend (config section [comm]). Each default is where
// measurements put the crossover on this project's machines (2 cores, Open
// MPI 4.1.4, 2 and 4 ranks): docs/BENCHMARKS.md, "Where the communicator's defaults come from".
struct CommOptions {
  // Buffers up to these sizes (all-reduce: the tensor; reduce-scatter: its
  // input; all-gather: its output) go through the MPI library's own
  // collective, larger ones through shardtrain's pipelined ring.
  // - all-reduce, where it does not go through shared memory (see
  //   shared_memory below: several nodes, or switched off): Open MPI's is as
  //   fast as the ring up to this size, then slows (it allocates a
  //   temporary buffer beyond malloc's mmap threshold at every call).
  int64_t small_message_bytes = 16 << 20;
  // - all-reduce, there too: the one-shot exchange (comm/allreduce_oneshot.h,
  //   which also coalesces all-reduces queued behind each other) while what a
  //   rank receives, (size - 1) times the tensor, is at most this: where it
  //   stops being ahead of the MPI collective with its arrival check.
  int64_t oneshot_bytes = 64 << 10;
  // - reduce-scatter: the ring is ahead of MPI_Reduce_scatter_block from
  //   about this size on.
  int64_t reduce_scatter_small_bytes = 128 << 10;
  // - all-gather: MPI_Allgather was as fast as the ring or faster at every
  //   size measured, so it is always used unless forced.
  int64_t allgather_small_bytes = int64_t(1) << 62;
  // Chunk size of the ring's pipeline: its staging stays in L2; larger
  // chunks were no faster, smaller ones slower, on one node. Where no two
  // ranks of a communicator share a node, at most kTcpEagerBytes
  // (transport/mpi_transport.h): a larger chunk waits a round trip for the
  // TCP transport's rendezvous.
  int64_t chunk_bytes = 256 << 10;
  // auto (by size, hierarchical when there are several nodes with several
  // ranks each), or force oneshot, mpi, ring or hierarchical (this choice
  // also applies to reduce-scatter and all-gather, whose one-shot is
  // oneshot_exchange.h's; hierarchical means ring for them and for
  // sub-communicators).
  AllreduceAlgorithm allreduce_algorithm = AllreduceAlgorithm::automatic;
  // A collective not complete after this long ends the job with a message
  // naming the operation, its sequence number, its size and the ranks that
  // never arrived.
  double timeout_s = 300.0;
  // Which backend moves GPU tensors (config comm.backend). Host tensors
  // always go through the MPI backend.
  GpuBackend backend = GpuBackend::automatic;
  // Before each of the MPI library's collectives, wait for every rank without
  // spinning and check that all issued the same collective (op, size, dtype,
  // root): comm/arrival_barrier.h. Off, a late rank makes the others'
  // progress threads spin at 100% of a core inside MPI, and mismatched sizes
  // may corrupt memory before the watchdog ends the job; on, small
  // collectives issued back to back cost a little more. The shared-memory
  // and one-shot all-reduces need no such check: their descriptors and
  // headers carry the same signature.
  bool check_arrival = true;
  // All-reduce through shared memory (comm/allreduce_shm.h) on communicators
  // whose ranks all share one node (ranks_per_node emulating several nodes
  // counts as several): every size, in place of the algorithms above (the
  // fastest path at every size measured). Each rank maps 512 KiB per such
  // communicator. Off: point-to-point only.
  bool shared_memory = true;
  // Node groups for node(), cross_node() and the hierarchical all-reduce: 0
  // asks the MPI library (ranks sharing memory); k > 0 makes every k
  // consecutive ranks a node, to emulate several nodes on one machine
  // (tests, benchmarks).
  int ranks_per_node = 0;
  // Algorithms chosen by measurement (engine/tuning.h): "auto" uses the
  // tuning file cached for this topology if there is one (`shardtrain bench
  // comm --tune-algorithms` writes one); without one, a world over several
  // nodes probes its algorithms at job start (engine/algorithm_probe.h) and
  // caches what it measured, and a world on one node keeps the thresholds
  // above (they were measured on one host). "probe" probes at start whatever
  // the cache holds, and writes nothing; "off" keeps the thresholds; a path
  // uses that file (an error unless it was measured on this topology). The
  // file or the probes replace the thresholds on the world communicator for
  // every collective and size they measured; a forced allreduce_algorithm
  // wins.
  std::string tuning = "auto";
  // The most the job-start probes may take, in seconds (agreed over the
  // ranks): they stop before a size whose estimate would pass it. 0: no
  // probes ("auto" then means the cached file or the thresholds).
  double probe_budget_s = 1.0;
  // Fault injection for diagnosis ([debug] slow_comm_ms): this rank's engine
  // waits this long before each collective, before announcing it to the other
  // ranks, so the others see this rank late and this rank sees its own
  // communication slow.
  double debug_delay_s = 0.0;
  // The strategy runs collectives on node(), cross_node() or groups() while
  // the world runs its own (HYBRID): then the world's MPI-library
  // collectives across nodes are the non-blocking calls, polled (as on a
  // group across nodes: Open MPI 4.1's blocking collectives over TCP stall
  // while another thread of the process is in a collective on another
  // communicator; docs/comm.md). Not a [comm] key: the job sets it from the
  // strategy. Off otherwise, since polling made DDP's steps over several
  // nodes slower (docs/BENCHMARKS.md, "HYBRID's world beside its groups").
  bool world_beside_groups = false;
};

// An Error naming the [comm] key out of range (the one place its limits
// live: the config and every communicator call it).
void validate(const CommOptions& options);

// What a backend's communicator is to its world: the world, a node, the
// ranks across nodes, a group of groups(), the ranks across those groups,
// or this rank alone. Its name() is comm_kind_name(kind).
enum class CommKind { world, node, cross, group, cross_group, self };
const char* comm_kind_name(CommKind kind);  // "world", "node", "cross-node", "group", "cross-group", "self"

// A split of a communicator's ranks into groups of k consecutive ranks
// (Communicator::groups): this rank's group, or the ranks with this rank's
// index in every group.
enum class GroupSide { within, across };

// The color of `rank` (of `size`) in that split: an Error unless
// 1 <= k <= size and k divides size.
int group_color(int rank, int size, int k, GroupSide side);

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

  // A batch of collectives launched as one where the backend can: NCCL wraps
  // those issued between begin_group() and end_group() in ncclGroupStart/End
  // (one fused launch for a batch of DDP buckets). Elsewhere nothing changes:
  // each collective is queued when issued, as always. Issue from one thread
  // while a group is open, and no wait() or barrier() inside it.
  virtual void begin_group() {}
  virtual void end_group() {}

  // Sub-communicators for hierarchical algorithms and hybrid sharding: the
  // ranks of this rank's node, and the ranks with this rank's node-local
  // index across nodes. Created once, owned by this communicator.
  virtual Communicator& node() = 0;
  virtual Communicator& cross_node() = 0;
  // Hybrid sharding over groups other than the nodes: the ranks split into
  // groups of `k` consecutive ranks; GroupSide::within is this rank's group
  // (its name "group"), across the ranks with this rank's index in every
  // group ("cross-group"). Made at the first call for (k, side), which is
  // collective: every rank makes the same calls in the same order. Owned by
  // this communicator; a group's own node() and cross_node() are errors.
  virtual Communicator& groups(int k, GroupSide side) = 0;

  // How this communicator picks its algorithms, for the job's [init] lines
  // (the tuning file it uses, or why none); empty where there is nothing
  // to say.
  virtual std::string algorithm_choice() const { return {}; }
};

// The MPI backend over a duplicate of MPI_COMM_WORLD (name "world"). MPI must
// be initialized with MPI_THREAD_MULTIPLE (comm::MpiEnv does).
std::unique_ptr<Communicator> make_mpi_world_communicator(const CommOptions& options);

}  // namespace shardtrain::comm
