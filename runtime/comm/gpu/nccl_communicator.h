// The NCCL backend of Communicator, for tensors on this rank's GPU.
//
// Set-up: rank 0 makes the ncclUniqueId and broadcasts it over MPI; each rank
// joins with the device its caller picked (device_for_local_rank: node-local
// rank modulo the visible devices). NCCL is loaded at run time
// (nccl_library.h).
//
// Issuing (the caller's thread, ~5-10 us): checks the arguments, records an
// event on the compute stream and makes the comm stream wait for it (the
// collective reads what the kernels issued before it wrote; never a
// device-wide synchronization), records a start event, launches the NCCL
// collective on the comm stream, records a completion event. Collectives run
// in issue order on the comm stream. With CommOptions::debug_delay_s
// ([debug] slow_comm_ms) a sleep kernel holds the comm stream that long
// before each collective (kernels/cuda/stream_sleep.h), inside the
// collective's measured time.
//
// Completion: one poller thread per communicator (started with its first
// collective) queries the events in issue order every ~20 us while anything
// is in flight and sleeps on a condition variable when idle. It marks each
// Work started (the GPU reached it: what ran before it on either stream has
// finished) and finished (algorithm "nccl"), keeps the tensors' storage
// referenced until then (dropped on the issuing thread at its next issue,
// like the MPI backend's engine), and polls ncclCommGetAsyncError. On an
// asynchronous NCCL error, or when a collective runs longer than
// CommOptions::timeout_s, it calls ncclCommAbort and ends the job through the
// watchdog (watchdog.h), with the MPI backend's one-line report
// (watchdog_report.h) naming the collective and what the other ranks do. The
// watchdog's own timeout check on these communicators is a backstop, 10 s
// later.
//
// A consumer of a result on the compute stream must wait() its Work first
// (as with the MPI backend): the Work finishes once the comm stream has
// passed the collective, so the data is in place for any stream.
//
// Groups: begin_group()/end_group() wrap the collectives issued between them
// in ncclGroupStart/End (a batch of bucket all-reduces launched as one, fewer
// kernel launches); their start and completion events are recorded at
// end_group(), around the group's launch.
// Issue from one thread while a group is open; barrier() is not allowed
// inside one.
//
// Sub-communicators: node(), cross_node() and groups() are NCCL
// communicators made at their first call with ncclCommSplit (NCCL >= 2.18),
// else with MPI's split and a fresh unique id. That first call is
// collective: every rank of the world must make it (in the same order).
// groups() splits the world only.
#pragma once

#include "runtime/comm/watchdog/comm_monitor.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/gpu/nccl_library.h"
#include "runtime/comm/watchdog/watchdog.h"

#include <cuda_runtime.h>
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace shardtrain::comm {

// node-local rank % number of visible CUDA devices; an Error without any.
int device_for_local_rank(int local_rank);

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `world` (every rank of it calls this; MPI initialized
  // with MPI_THREAD_MULTIPLE). Brings up `device` (cuda::init_device) unless
  // the process already has, and then it must be the same one.
  static std::unique_ptr<NcclCommunicator> make_world(MPI_Comm world, int device, const CommOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  int device() const { return device_; }

  WorkPtr allreduce(const Tensor& t, ReduceOp op) override;
  WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr allgather(const Tensor& in, const Tensor& out) override;
  WorkPtr broadcast(const Tensor& t, int root) override;
  // An all-reduce of one element, waited for.
  WorkPtr barrier() override;

  Communicator& node() override;
  Communicator& cross_node() override;
  Communicator& groups(int k, GroupSide side) override;

  void begin_group() override;
  void end_group() override;

  // Waits for what is in flight, stops the pollers, destroys the NCCL
  // communicators, stops the watchdog. Runs at the start of MPI_Finalize if
  // the communicator is still alive then. Idempotent.
  void shutdown();

 private:
  using Kind = CommKind;
  struct Pending {
    WorkPtr work;
    OpRecord record;
    Tensor a, b;  // held until the collective completes
    cudaEvent_t start = nullptr, done = nullptr;
    bool started = false;
    double started_at = 0;
  };
  using Launch = std::function<ncclResult_t(cudaStream_t)>;

  NcclCommunicator(ncclComm_t comm, Kind kind, int rank, int size, std::vector<int> world_ranks, int device,
                   const CommOptions& options, std::shared_ptr<Watchdog> watchdog);
  void check_device(const char* what, const Tensor& t) const;
  void check_reducible(const char* what, const Tensor& t) const;
  ncclRedOp_t reduce_op(ReduceOp op) const;
  WorkPtr issue(OpCode op, const Tensor& a, const Tensor& b, int root, int64_t bytes, const Launch& launch);
  cudaEvent_t take_event();  // under mu_
  void poll_loop();
  // An asynchronous NCCL error ends the job.
  void check_async_error();
  [[noreturn]] void fail(const OpRecord& op, const std::string& what);
  void abort_nccl();
  // The ranks of `group` (an MPI split of this communicator by `color`).
  NcclCommunicator& split(MPI_Comm group, int color, Kind kind);
  NcclCommunicator& self_communicator();

  const Kind kind_;
  const std::string name_;
  const CommOptions options_;
  const int device_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<Watchdog> watchdog_;
  std::shared_ptr<CommMonitor> monitor_;

  // Issuing: one collective at a time, in sequence order.
  std::mutex issue_mu_;
  int64_t next_seq_ = 0;
  bool shut_down_ = false;
  bool in_group_ = false;
  std::vector<Pending> group_;   // issued in the open group, completion events not yet recorded
  cudaEvent_t ready_ = nullptr;  // compute stream -> comm stream, re-recorded per collective
  Tensor barrier_buffer_;

  // Shared with the poller.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;   // launched, in issue order
  std::vector<Pending> retired_;  // completed; dropped by the issuing thread
  std::vector<cudaEvent_t> free_events_;
  bool stop_ = false;
  std::thread poller_;
  std::once_flag abort_once_;
  std::atomic<bool> aborting_{false};  // set before ncclCommAbort: issue() stops launching

  // Sub-communicators (world only): the MPI groups, NCCL communicators made lazily.
  MPI_Comm mpi_ = MPI_COMM_NULL;  // this communicator's ranks (world: a duplicate; groups() own theirs)
  MPI_Comm mpi_node_ = MPI_COMM_NULL, mpi_cross_ = MPI_COMM_NULL;
  int node_color_ = 0, local_rank_ = 0;
  std::mutex sub_mu_;
  std::unique_ptr<NcclCommunicator> node_, cross_, self_;
  std::map<std::pair<int, GroupSide>, std::unique_ptr<NcclCommunicator>> groups_;
};

// The NCCL world communicator over a duplicate of `world`.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm world, int device, const CommOptions& options);

}  // namespace shardtrain::comm
