// The MPI backend for tensors on the GPU, for machines where NCCL is not an
// option (or to compare against it). Wraps an MPI communicator (the MPI
// backend's, for host tensors) and moves device tensors one of two ways:
//
//   "cuda-aware"             the MPI library takes device pointers itself
//                            (MPIX_Query_cuda_support() == 1): f32 sums,
//                            all-gathers and broadcasts go straight to
//                            MPI_Allreduce / MPI_Reduce_scatter_block /
//                            MPI_Allgather / MPI_Bcast on device memory
//                            (shardtrain's own algorithms reduce on the CPU,
//                            so they cannot); bf16 and averages, which need a
//                            reduction MPI cannot run on device memory, are
//                            staged as below.
//   "staged via pinned host" device -> pinned host copy on the comm stream
//                            (after an event on the compute stream), the
//                            wrapped MPI backend's collective on the host
//                            copy, host -> device copy back.
//
// A worker thread runs device collectives in issue order: it waits for the
// device-to-host copy (an event, not a device-wide sync), issues the MPI
// collective, waits for it, copies back and finishes the Work. Host tensors
// pass straight through to the wrapped communicator when no device
// collective is queued ahead of them (else they queue behind, so that every
// rank issues the same sequence to the wrapped communicator).
//
// Limits: one device collective in flight at a time (no overlap of one's
// copies with the next one's transfer); the cuda-aware path's MPI calls are
// not watched by the watchdog (the staged path's are: they run on the
// wrapped MPI backend). node()/cross_node() wrap the host communicator's and
// always stage.
#pragma once

#include "runtime/comm/communicator.h"

#include <cuda_runtime.h>
#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace shardtrain::comm {

class DeviceMpiCommunicator final : public Communicator {
 public:
  // `host`: the communicator for host tensors (and the staged path).
  // `cuda_aware_comm`: a communicator with host's ranks in the same order,
  // duplicated for the cuda-aware path (MPI_COMM_NULL: always stage).
  // Device tensors must be on cuda:`device`, which must be up
  // (use_cuda_device). Collective over host's ranks.
  DeviceMpiCommunicator(std::unique_ptr<Communicator> host, MPI_Comm cuda_aware_comm, int device);
  // Non-owning variant (sub-communicators): `host` must outlive this.
  DeviceMpiCommunicator(Communicator& host, MPI_Comm cuda_aware_comm, int device);
  ~DeviceMpiCommunicator() override;

  // Whether the MPI library handles device memory: MPIX_Query_cuda_support()
  // where Open MPI's extension exists, else false.
  static bool mpi_is_cuda_aware();
  // "cuda-aware" | "staged via pinned host"
  std::string mode() const { return cuda_aware_ ? "cuda-aware" : "staged via pinned host"; }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }

  WorkPtr allreduce(const Tensor& t, ReduceOp op) override;
  WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr allgather(const Tensor& in, const Tensor& out) override;
  WorkPtr broadcast(const Tensor& t, int root) override;
  WorkPtr barrier() override;

  Communicator& node() override;
  Communicator& cross_node() override;
  Communicator& groups(int k, GroupSide side) override;

  // Finishes what is queued and stops the worker. Idempotent.
  void shutdown();

 private:
  enum class Op { allreduce, reduce_scatter, allgather, broadcast, barrier };
  struct Task {
    Op op = Op::barrier;
    ReduceOp reduce = ReduceOp::sum;
    Tensor a, b;            // the caller's tensors (device, or host when passed through the queue)
    Tensor host_a, host_b;  // pinned staging copies (staged device collectives)
    int root = -1;
    bool device = false;          // a device collective (else: the wrapped communicator, unchanged)
    bool direct = false;          // device pointers straight to the MPI library
    cudaEvent_t ready = nullptr;  // input copied (staged) or produced (direct)
    WorkPtr work;                 // what the caller holds
  };

  void start(int device);
  bool is_device(const Tensor& t) const;
  // Host tensors straight to the wrapped communicator, or queued behind device work.
  WorkPtr submit(Task&& task);
  WorkPtr host_call(const Task& task);
  void prepare_device(Task& task);
  void worker_loop();
  void run(Task& task);
  void run_direct(const Task& task);

  std::unique_ptr<Communicator> owned_host_;
  Communicator* host_;
  const int device_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // cuda-aware path (a duplicate)
  bool cuda_aware_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;  // in issue order; a task leaves once issued to MPI
  int64_t next_seq_ = 0;
  bool stop_ = false;
  std::thread worker_;

  std::mutex sub_mu_;
  std::unique_ptr<DeviceMpiCommunicator> node_, cross_;
  std::map<std::pair<int, GroupSide>, std::unique_ptr<DeviceMpiCommunicator>> groups_;
};

}  // namespace shardtrain::comm
