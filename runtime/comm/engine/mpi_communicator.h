// The MPI backend of Communicator: validates a call on the caller's thread,
// gives it the next sequence number, picks its algorithm by size, and queues
// it on the communicator's progress engine. The engine runs it with the
// one-shot all-reduce (allreduce_oneshot: small all-reduces, several already
// queued on disjoint buffers coalesced into one exchange), the one-shot
// reduce-scatter and all-gather (reduce_scatter_oneshot, allgather_oneshot),
// the MPI library's collective (mpi_native), a pipelined ring
// (allreduce_ring, reduce_scatter_ring, allgather_ring) or the hierarchical
// all-reduce.
//
// The world communicator also owns the watchdog and the node / cross-node
// sub-communicators and any groups() (each with its own MPI communicator and
// engine), plus two
// private MPI communicators over the same groups on which the world's engine
// runs the hierarchical all-reduce: the sub-communicators' engines may be
// busy with collectives of their own at the same time.
#pragma once

#include "runtime/comm/algorithms/allreduce_oneshot.h"
#include "runtime/comm/algorithms/allreduce_shm.h"
#include "runtime/comm/transport/arrival_barrier.h"
#include "runtime/comm/watchdog/comm_monitor.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/algorithms/mpi_native.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/engine/progress_engine.h"
#include "runtime/comm/engine/scratch.h"
#include "runtime/comm/engine/tuning.h"
#include "runtime/comm/transport/shm_window.h"
#include "runtime/comm/watchdog/watchdog.h"

#include <mpi.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace shardtrain::comm {

// This rank's node within `comm` (a new MPI communicator): the MPI library's
// shared-memory split, or, to emulate nodes on one machine (ranks_per_node >
// 0), consecutive groups of ranks_per_node ranks. Collective over `comm`.
MPI_Comm split_node(MPI_Comm comm, int ranks_per_node);

class MpiCommunicator final : public Communicator, private Executor {
 public:
  static std::unique_ptr<MpiCommunicator> make_world(const CommOptions& options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  WorkPtr allreduce(const Tensor& t, ReduceOp op) override;
  WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr allgather(const Tensor& in, const Tensor& out) override;
  WorkPtr broadcast(const Tensor& t, int root) override;
  WorkPtr barrier() override;

  Communicator& node() override;
  Communicator& cross_node() override;
  Communicator& groups(int k, GroupSide side) override;
  std::string algorithm_choice() const override { return tuning_status_; }

  // This job's topology (world communicator; set up with it).
  const TopologyFingerprint& fingerprint() const { return fingerprint_; }

  // Runs what is queued, stops the engines and the watchdog, frees the MPI
  // communicators. Runs at the start of MPI_Finalize if the communicator is
  // still alive then (a hook on MPI_COMM_SELF), so a communicator held in a
  // static is safe. Idempotent.
  void shutdown();

 private:
  using Kind = CommKind;
  enum class Algo { local, mpi, ring, hierarchical, oneshot, shm };

  // Takes ownership of `comm` (MPI_COMM_NULL for a communicator of one rank
  // that needs no MPI).
  MpiCommunicator(MPI_Comm comm, Kind kind, const CommOptions& options, const BackoffPolicy& policy,
                  std::shared_ptr<Watchdog> watchdog);
  void make_sub_communicators();
  // The fingerprint (collective) and comm.tuning's file: read by rank 0 and
  // broadcast, so that every rank picks the same algorithms; or the probes.
  void load_tuning(int nodes, int largest_node, int local_rank);
  // Job-start probes (engine/algorithm_probe.h) on this world, their result
  // followed from now on and, where `cache_path` is not empty, written there
  // by rank 0 for the next job of this topology.
  void probe(const std::string& cache_path);
  class Prober;  // the ProbeTarget over this communicator (mpi_communicator_probe.cpp)
  static const char* algo_name(Algo algo);
  static std::optional<Algo> algo_named(std::string_view name);  // algo_name's inverse; none for another name
  Algo pick(OpCode op, int64_t bytes) const;
  // The tuning file's algorithm for op at `bytes`, where it applies here.
  std::optional<Algo> tuned(OpCode op, int64_t bytes) const;
  // Numbers the collective, records it for the watchdog, queues it.
  WorkPtr issue(OpCode op, Algo algo, Task&& task);
  // On the thread running tasks: runs them; an exception ends the job through
  // the watchdog.
  bool prepare(const Task& task, const Task* running) override;
  size_t group(std::span<const Task> queued) override;
  void execute(std::span<Task> tasks) override;
  void run(const Task& task);
  void fill_inplace_ops(std::span<Task> tasks);
  void run_oneshot(std::span<Task> tasks, const Task*& current);
  void run_shm(std::span<Task> tasks, const Task*& current);
  void move_on(std::span<Task> tasks, size_t waits_in, size_t begin, size_t end, const Task*& current);
  // Whether a task first waits for every rank to arrive and agree
  // (ArrivalBarrier): every task run with MPI's collectives, unless
  // CommOptions::check_arrival is off (a barrier is one anyway).
  bool checks_arrival(const Task& task) const;
  // Arrival barriers are posted ahead only while the running collective is
  // at most this large: ahead of small collectives issued back to back they
  // hide the barrier's latency (4 KiB all-reduce, 2 ranks: 0.42 -> 0.65 of
  // MPI's speed), while the messages arriving during a large MPI collective
  // slowed it down (MPI_Allgather of 1-8 MiB: -30%).
  static constexpr int64_t kLookaheadBytes = 256 << 10;
  // Coalescing: at most this many one-shot (or shared-memory) all-reduces, of
  // at most this many bytes in all, run as one group (one-shot: their
  // messages all in flight at once; shared memory: packed into one step).
  static constexpr size_t kCoalesceOps = 32;
  static constexpr int64_t kCoalesceBytes = 256 << 10;
  MpiCommunicator& self_communicator();
  // Collective over comm_: whether its ranks share one emulated node
  // (comm.ranks_per_node; true where nodes are not emulated).
  bool on_one_emulated_node() const;

  const Kind kind_;
  const std::string name_;
  const CommOptions options_;
  const BackoffPolicy policy_;  // of every wait (BackoffPolicy::for_node)
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<Watchdog> watchdog_;  // null for self communicators
  std::shared_ptr<CommMonitor> monitor_;

  // Used only by the thread running tasks (the engine's, or a waiting
  // caller's: ProgressEngine::help), one at a time.
  std::unique_ptr<MpiTransport> transport_;
  std::unique_ptr<MpiNative> native_;
  Scratch scratch_;
  AllreduceOneshot::Workspace oneshot_workspace_;
  std::vector<InPlaceAllreduce> inplace_ops_;  // the group being run by one-shot or shared memory
  std::unique_ptr<ShmWindow> shm_;             // null unless every rank is on this node (set up before any issue)
  int64_t shm_step_ = 0;
  std::deque<ArrivalBarrier> arrivals_;  // posted ahead, for the coming tasks
  MPI_Comm hier_node_ = MPI_COMM_NULL, hier_cross_ = MPI_COMM_NULL;
  std::unique_ptr<MpiTransport> hier_node_transport_, hier_cross_transport_;

  // A group across nodes whose collectives run while another communicator
  // of this process runs its own (HYBRID's replica groups, and its shard
  // groups where they span nodes). Its all-reduces, reduce-scatters and
  // all-gathers use the point-to-point algorithms, never the MPI library's,
  // and its broadcasts and barriers poll the MPI library's non-blocking
  // calls: Open MPI 4.1's blocking collectives over TCP stall while another
  // thread of the process is in a collective on another communicator
  // (docs/comm.md).
  bool beside_others_ = false;
  // The world's MPI-library collectives are polled (CommOptions::world_beside_groups,
  // over several nodes): MpiNative's and the hierarchical all-reduce's step across nodes.
  bool polls_native_ = false;
  // The one-shot all-reduce's message size: the eager limit of the transport
  // its messages take (AllreduceOneshot), larger where no two ranks share a node.
  int64_t oneshot_fragment_bytes_ = AllreduceOneshot::kFragmentBytes;
  // The rings' chunk: comm.chunk_bytes, and where no two ranks share a node
  // at most one eager message of the TCP transport, so that no chunk waits
  // for a rendezvous's extra round trip.
  int64_t ring_chunk_bytes_ = 0;
  bool hierarchical_possible_ = false;  // the same number of ranks on every node
  bool hierarchical_useful_ = false;    // and >= 2 nodes with >= 2 ranks each
  TopologyFingerprint fingerprint_;
  std::optional<Tuning> tuning_;  // world: comm.tuning's file, or the probes'
  std::optional<Algo> probing_;   // while probing: every collective's algorithm
  std::string tuning_status_;
  std::unique_ptr<MpiCommunicator> node_, cross_;
  std::mutex self_mu_;  // self_ and groups_
  std::unique_ptr<MpiCommunicator> self_;
  std::map<std::pair<int, GroupSide>, std::unique_ptr<MpiCommunicator>> groups_;

  std::mutex issue_mu_;
  int64_t next_seq_ = 0;
  bool shut_down_ = false;
  std::unique_ptr<ProgressEngine> engine_;
};

}  // namespace shardtrain::comm
