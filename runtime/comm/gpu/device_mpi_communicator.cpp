#include "runtime/comm/gpu/device_mpi_communicator.h"

#include "kernels/cuda/context.h"
#include "runtime/comm/collective_args.h"
#include "runtime/comm/gpu_backend.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support

#include <climits>

namespace shardtrain::comm {
namespace {

const char* op_label(int op) {
  static const char* names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "barrier"};
  return names[op];
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16: return MPI_UINT16_T;  // moved, never reduced, on this path
  }
  return MPI_BYTE;
}

// Waits for `e` and destroys it.
void wait_and_destroy(cudaEvent_t e) {
  const cudaError_t err = cudaEventSynchronize(e);
  cudaEventDestroy(e);
  ST_CUDA_CHECK(err);
}

}  // namespace

bool DeviceMpiCommunicator::mpi_is_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

DeviceMpiCommunicator::DeviceMpiCommunicator(std::unique_ptr<Communicator> host, MPI_Comm cuda_aware_comm, int device)
    : owned_host_(std::move(host)), host_(owned_host_.get()), device_(device) {
  start(device);
  if (cuda_aware_comm != MPI_COMM_NULL) {
    check_mpi(MPI_Comm_dup(cuda_aware_comm, &comm_), "MPI_Comm_dup");
    // Every rank must take the same path: cuda-aware only if all can.
    int local = mpi_is_cuda_aware() ? 1 : 0, all = 0;
    check_mpi(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    cuda_aware_ = all == 1;
  }
}

DeviceMpiCommunicator::DeviceMpiCommunicator(Communicator& host, MPI_Comm cuda_aware_comm, int device)
    : DeviceMpiCommunicator(std::unique_ptr<Communicator>(), cuda_aware_comm, device) {
  host_ = &host;
}

void DeviceMpiCommunicator::start(int device) {
  ST_CHECK(cuda::device_initialized() && cuda::current_device() == device,
           "the device MPI communicator needs cuda:{} brought up first (use_cuda_device)", device);
}

DeviceMpiCommunicator::~DeviceMpiCommunicator() { shutdown(); }

void DeviceMpiCommunicator::shutdown() {
  {
    std::lock_guard lock(sub_mu_);
    if (node_) node_->shutdown();
    if (cross_) cross_->shutdown();
    for (auto& [key, sub] : groups_) sub->shutdown();
  }
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();  // drains the queue first
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Communicator& DeviceMpiCommunicator::node() {
  std::lock_guard lock(sub_mu_);
  if (!node_) node_ = std::make_unique<DeviceMpiCommunicator>(host_->node(), MPI_COMM_NULL, device_);
  return *node_;
}

Communicator& DeviceMpiCommunicator::cross_node() {
  std::lock_guard lock(sub_mu_);
  if (!cross_) cross_ = std::make_unique<DeviceMpiCommunicator>(host_->cross_node(), MPI_COMM_NULL, device_);
  return *cross_;
}

Communicator& DeviceMpiCommunicator::groups(int k, GroupSide side) {
  Communicator& host = host_->groups(k, side);
  if (&host == host_) return *this;
  std::lock_guard lock(sub_mu_);
  std::unique_ptr<DeviceMpiCommunicator>& sub = groups_[{k, side}];
  if (!sub) sub = std::make_unique<DeviceMpiCommunicator>(host, MPI_COMM_NULL, device_);
  return *sub;
}

// ---- issuing ------------------------------------------------------------------

bool DeviceMpiCommunicator::is_device(const Tensor& t) const {
  if (!t.defined() || t.device().is_cpu()) return false;
  ST_CHECK(t.device() == Device::cuda(device_), "comm '{}' (mpi, device): tensors must be on cuda:{}, not {}", name(),
           device_, t.device().str());
  return true;
}

WorkPtr DeviceMpiCommunicator::host_call(const Task& t) {
  switch (t.op) {
    case Op::allreduce: return host_->allreduce(t.device ? t.host_a : t.a, t.reduce);
    case Op::reduce_scatter:
      return host_->reduce_scatter(t.device ? t.host_a : t.a, t.device ? t.host_b : t.b, t.reduce);
    case Op::allgather: return host_->allgather(t.device ? t.host_a : t.a, t.device ? t.host_b : t.b);
    case Op::broadcast: return host_->broadcast(t.device ? t.host_a : t.a, t.root);
    case Op::barrier: break;
  }
  return host_->barrier();
}

// On the caller's thread: order after the compute stream; stage inputs.
void DeviceMpiCommunicator::prepare_device(Task& t) {
  const cudaStream_t compute = cuda::compute_stream(), comm = cuda::comm_stream();
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&t.ready, cudaEventDisableTiming));
  if (t.direct) {  // the MPI library reads device memory from the host once the kernels are done
    ST_CUDA_CHECK(cudaEventRecord(t.ready, compute));
    return;
  }
  cudaEvent_t produced = nullptr;
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
  ST_CUDA_CHECK(cudaEventRecord(produced, compute));
  ST_CUDA_CHECK(cudaStreamWaitEvent(comm, produced, 0));
  cudaEventDestroy(produced);  // the wait keeps the recorded state
  t.host_a = Tensor::empty_pinned(t.a.shape(), t.a.dtype());
  ST_CUDA_CHECK(cudaMemcpyAsync(t.host_a.raw(), t.a.raw(), t.a.nbytes(), cudaMemcpyDeviceToHost, comm));
  if (t.b.defined()) t.host_b = Tensor::empty_pinned(t.b.shape(), t.b.dtype());
  ST_CUDA_CHECK(cudaEventRecord(t.ready, comm));
}

WorkPtr DeviceMpiCommunicator::submit(Task&& t) {
  std::unique_lock lock(mu_);
  ST_CHECK(!stop_, "comm '{}': {} after the communicator was shut down", name(), op_label(int(t.op)));
  if (!t.device && queue_.empty()) {
    // Nothing queued ahead: every earlier collective was issued to the
    // wrapped communicator already, so the order is kept.
    lock.unlock();
    return host_call(t);
  }
  const int64_t bytes = int64_t((t.op == Op::barrier ? 0 : t.a.nbytes()));
  t.work = std::make_shared<Work>(op_label(int(t.op)), next_seq_++, bytes);
  WorkPtr work = t.work;
  if (t.device) {
    try {
      prepare_device(t);
    } catch (...) {
      if (t.ready) cudaEventDestroy(t.ready);
      throw;
    }
  }
  queue_.push_back(std::move(t));
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  lock.unlock();
  cv_.notify_one();
  return work;
}

WorkPtr DeviceMpiCommunicator::allreduce(const Tensor& t, ReduceOp op) {
  Task task;
  task.op = Op::allreduce;
  task.reduce = op;
  task.a = t;
  task.device = is_device(t);
  task.direct = task.device && cuda_aware_ && op == ReduceOp::sum && t.dtype() == DType::f32 && t.numel() <= INT_MAX;
  return submit(std::move(task));
}

WorkPtr DeviceMpiCommunicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  Task task;
  task.op = Op::reduce_scatter;
  task.reduce = op;
  task.a = in;
  task.b = out;
  task.device = is_device(in);
  ST_CHECK(task.device == is_device(out), "comm '{}': reduce_scatter between host and device memory", name());
  check_reduce_scatter_args(name(), in, out, rank(), size());
  ST_CHECK(in.dtype() != DType::i32, "comm '{}': reduce_scatter reduces f32 or bf16 tensors, not i32", name());
  task.direct = task.device && cuda_aware_ && op == ReduceOp::sum && in.dtype() == DType::f32 && !overlap(in, out) &&
                out.numel() <= INT_MAX;
  return submit(std::move(task));
}

WorkPtr DeviceMpiCommunicator::allgather(const Tensor& in, const Tensor& out) {
  Task task;
  task.op = Op::allgather;
  task.a = in;
  task.b = out;
  task.device = is_device(in);
  ST_CHECK(task.device == is_device(out), "comm '{}': allgather between host and device memory", name());
  check_allgather_args(name(), in, out, rank(), size());
  task.direct = task.device && cuda_aware_ && in.numel() <= INT_MAX / std::max(1, size());
  return submit(std::move(task));
}

WorkPtr DeviceMpiCommunicator::broadcast(const Tensor& t, int root) {
  Task task;
  task.op = Op::broadcast;
  task.a = t;
  task.root = root;
  task.device = is_device(t);
  ST_CHECK(root >= 0 && root < size(), "comm '{}': broadcast from rank {} of {}", name(), root, size());
  task.direct = task.device && cuda_aware_ && t.nbytes() <= size_t(INT_MAX);
  return submit(std::move(task));
}

WorkPtr DeviceMpiCommunicator::barrier() {
  Task task;
  task.op = Op::barrier;
  return submit(std::move(task));
}

// ---- the worker ---------------------------------------------------------------------

void DeviceMpiCommunicator::worker_loop() {
  cudaSetDevice(device_);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;    // stopping, drained
    Task& front = queue_.front();  // only this thread pops
    lock.unlock();
    Task task;
    std::exception_ptr error;
    WorkPtr host_work;
    try {
      if (front.device) wait_and_destroy(std::exchange(front.ready, nullptr));
      front.work->mark_started(front.direct ? "cuda-aware" : front.device ? "staged" : "mpi", now_seconds());
      if (!front.direct) {
        // Issued while the task is still queued: a host collective submitted
        // meanwhile queues behind it rather than overtake it.
        host_work = host_call(front);
      }
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (!error) {
      try {
        if (task.direct) {
          run_direct(task);
        } else {
          host_work->wait();
          task.work->mark_arrived(host_work->arrived_at());
          if (task.device) run(task);
        }
      } catch (...) {
        error = std::current_exception();
      }
    }
    task.work->mark_finished(now_seconds(), error);
    task = Task();  // release the tensors before sleeping
    lock.lock();
  }
}

// The staged path's way back: host result -> device, waited for.
void DeviceMpiCommunicator::run(Task& t) {
  const Tensor& dst = t.op == Op::reduce_scatter || t.op == Op::allgather ? t.b : t.a;
  const Tensor& src = t.op == Op::reduce_scatter || t.op == Op::allgather ? t.host_b : t.host_a;
  if (t.op == Op::barrier || dst.nbytes() == 0) return;
  const cudaStream_t comm = cuda::comm_stream();
  ST_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), dst.nbytes(), cudaMemcpyHostToDevice, comm));
  cudaEvent_t copied = nullptr;
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  ST_CUDA_CHECK(cudaEventRecord(copied, comm));
  wait_and_destroy(copied);
}

// Device pointers straight to the (CUDA-aware) MPI library.
void DeviceMpiCommunicator::run_direct(const Task& t) {
  const MPI_Datatype type = mpi_type(t.a.dtype());
  switch (t.op) {
    case Op::allreduce:
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.a.raw(), int(t.a.numel()), MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
      return;
    case Op::reduce_scatter:
      check_mpi(MPI_Reduce_scatter_block(t.a.raw(), t.b.raw(), int(t.b.numel()), MPI_FLOAT, MPI_SUM, comm_),
                "MPI_Reduce_scatter_block");
      return;
    case Op::allgather: {
      int rank = 0;
      MPI_Comm_rank(comm_, &rank);
      const auto* own = static_cast<const std::byte*>(t.b.raw()) + size_t(rank) * t.a.nbytes();
      if (own == t.a.raw())
        check_mpi(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t.b.raw(), int(t.a.numel()), type, comm_),
                  "MPI_Allgather");
      else
        check_mpi(MPI_Allgather(t.a.raw(), int(t.a.numel()), type, t.b.raw(), int(t.a.numel()), type, comm_),
                  "MPI_Allgather");
      return;
    }
    case Op::broadcast:
      check_mpi(MPI_Bcast(t.a.raw(), int(t.a.nbytes()), MPI_BYTE, t.root, comm_), "MPI_Bcast");
      return;
    case Op::barrier: break;
  }
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

// ---- runtime/comm/gpu_backend.h ---------------------------------------------------

std::unique_ptr<Communicator> make_device_mpi_world_communicator(int device, const CommOptions& options) {
  if (!cuda::device_initialized()) cuda::init_device(device);
  return std::make_unique<DeviceMpiCommunicator>(make_mpi_world_communicator(options), MPI_COMM_WORLD, device);
}

std::string device_mpi_mode(const Communicator& comm) {
  const auto* d = dynamic_cast<const DeviceMpiCommunicator*>(&comm);
  return d ? d->mode() : std::string();
}

}  // namespace shardtrain::comm
