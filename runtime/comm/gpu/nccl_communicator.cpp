#include "runtime/comm/gpu/nccl_communicator.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/stream_sleep.h"
#include "runtime/comm/gpu_backend.h"
#include "runtime/comm/collective_args.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/transport/mpi_world.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <fmt/format.h>
#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>

namespace shardtrain::comm {
namespace {

// Poll interval while collectives are in flight, and the idle wake-up (for
// the asynchronous error check).
constexpr auto kPoll = std::chrono::microseconds(20);
constexpr auto kIdleWake = std::chrono::milliseconds(100);
constexpr double kAsyncCheckEvery_s = 1e-3;
// The watchdog's own timeout on NCCL communicators comes this much later
// than the poller's, which aborts NCCL first.
constexpr double kWatchdogGrace_s = 10.0;
// How long ncclCommAbort may take before the job ends without it.
constexpr double kAbortWait_s = 5.0;

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
  }
  return ncclFloat32;
}

// A unique id made on rank 0 of `comm` and broadcast with whether making it
// worked (so that a failure on rank 0 is an Error everywhere, not a hang).
ncclUniqueId bootstrap_id(MPI_Comm comm) {
  struct {
    int32_t ok = 0;
    char why[256] = {};
    ncclUniqueId id{};
  } msg;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    try {
      ST_NCCL_CHECK(nccl().GetUniqueId(&msg.id));
      msg.ok = 1;
    } catch (const std::exception& e) {
      std::snprintf(msg.why, sizeof(msg.why), "%s", e.what());
    }
  }
  check_mpi(MPI_Bcast(&msg, int(sizeof(msg)), MPI_BYTE, 0, comm), "MPI_Bcast");
  ST_CHECK(msg.ok, "NCCL set-up: rank 0 could not make the unique id: {}", msg.why);
  return msg.id;
}

ncclComm_t init_rank(int size, const ncclUniqueId& id, int rank, int device) {
  ST_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t c = nullptr;
  ST_NCCL_CHECK(nccl().CommInitRank(&c, size, id, rank));
  return c;
}

}  // namespace

int device_for_local_rank(int local_rank) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  ST_CHECK(err == cudaSuccess && count > 0, "no CUDA device for node-local rank {}: {}", local_rank,
           err == cudaSuccess ? "none visible" : cudaGetErrorString(err));
  return local_rank % count;
}

// ---- construction -------------------------------------------------------------

std::unique_ptr<NcclCommunicator> NcclCommunicator::make_world(MPI_Comm world, int device, const CommOptions& options) {
  ST_CHECK(options.timeout_s > 0, "comm.timeout_s must be > 0, not {}", options.timeout_s);
  ST_CHECK(options.ranks_per_node >= 0, "comm.ranks_per_node must be >= 0, not {}", options.ranks_per_node);
  int initialized = 0, level = 0;
  MPI_Initialized(&initialized);
  ST_CHECK(initialized, "the NCCL communicator needs MPI initialized first (comm::MpiEnv)");
  MPI_Query_thread(&level);
  ST_CHECK(level == MPI_THREAD_MULTIPLE,
           "the NCCL communicator needs MPI_THREAD_MULTIPLE (its watchdog calls "
           "MPI from a thread), the MPI library provides thread level {}",
           level);
  const NcclLibrary& lib = nccl();  // an Error here names LD_LIBRARY_PATH
  if (!cuda::device_initialized())
    cuda::init_device(device);
  else
    ST_CHECK(cuda::current_device() == device, "the NCCL communicator wants cuda:{}, the process uses cuda:{}", device,
             cuda::current_device());

  MPI_Comm comm;
  check_mpi(MPI_Comm_dup(world, &comm), "MPI_Comm_dup");
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclComm_t nc = init_rank(size, bootstrap_id(comm), rank, device);
  (void)lib;
  auto watchdog = std::make_shared<Watchdog>(world);
  std::unique_ptr<NcclCommunicator> w(
      new NcclCommunicator(nc, Kind::world, rank, size, world_ranks_of(comm), device, options, watchdog));
  w->mpi_ = comm;

  // The node and cross-node groups, as the MPI backend makes them.
  if (options.ranks_per_node > 0)
    check_mpi(MPI_Comm_split(comm, rank / options.ranks_per_node, rank, &w->mpi_node_), "MPI_Comm_split");
  else
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &w->mpi_node_),
              "MPI_Comm_split_type");
  MPI_Comm_rank(w->mpi_node_, &w->local_rank_);
  w->node_color_ = rank;  // the world rank of the node's first rank
  check_mpi(MPI_Bcast(&w->node_color_, 1, MPI_INT, 0, w->mpi_node_), "MPI_Bcast");
  check_mpi(MPI_Comm_split(comm, w->local_rank_, rank, &w->mpi_cross_), "MPI_Comm_split");
  NcclCommunicator* raw = w.get();
  shutdown_at_mpi_finalize(raw, [raw] { raw->shutdown(); });
  return w;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, Kind kind, int rank, int size, std::vector<int> world_ranks,
                                   int device, const CommOptions& options, std::shared_ptr<Watchdog> watchdog)
    : kind_(kind),
      name_(comm_kind_name(kind)),
      options_(options),
      device_(device),
      comm_(comm),
      rank_(rank),
      size_(size),
      watchdog_(std::move(watchdog)) {
  monitor_ =
      std::make_shared<CommMonitor>(name_, rank_, size_, std::move(world_ranks), options_.timeout_s + kWatchdogGrace_s);
  if (watchdog_) watchdog_->add(monitor_);
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

NcclCommunicator& NcclCommunicator::split(MPI_Comm group, int color, Kind kind) {
  const NcclLibrary& lib = nccl();
  int rank = 0, size = 1;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &size);
  ncclComm_t c = nullptr;
  if (lib.CommSplit) {
    ST_CUDA_CHECK(cudaSetDevice(device_));
    ST_NCCL_CHECK(lib.CommSplit(comm_, color, rank_, &c, nullptr));
  } else {
    c = init_rank(size, bootstrap_id(group), rank, device_);
  }
  return *new NcclCommunicator(c, kind, rank, size, world_ranks_of(group), device_, options_, watchdog_);
}

NcclCommunicator& NcclCommunicator::self_communicator() {
  std::lock_guard lock(sub_mu_);
  if (!self_) {
    ncclUniqueId id{};
    ST_NCCL_CHECK(nccl().GetUniqueId(&id));
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    self_.reset(new NcclCommunicator(init_rank(1, id, 0, device_), Kind::self, 0, 1, {world_rank}, device_, options_,
                                     watchdog_));
  }
  return *self_;
}

Communicator& NcclCommunicator::node() {
  switch (kind_) {
    case Kind::world: {
      std::lock_guard lock(sub_mu_);
      if (!node_) node_.reset(&split(mpi_node_, node_color_, Kind::node));
      return *node_;
    }
    case Kind::node: return *this;
    case Kind::cross: return self_communicator();
    case Kind::group:
    case Kind::cross_group: throw Error(fmt::format("comm '{}': a group's node() is not made", name_));
    case Kind::self: break;
  }
  return *this;
}

Communicator& NcclCommunicator::cross_node() {
  switch (kind_) {
    case Kind::world: {
      std::lock_guard lock(sub_mu_);
      if (!cross_) cross_.reset(&split(mpi_cross_, local_rank_, Kind::cross));
      return *cross_;
    }
    case Kind::node: return self_communicator();
    case Kind::cross: return *this;
    case Kind::group:
    case Kind::cross_group: throw Error(fmt::format("comm '{}': a group's cross_node() is not made", name_));
    case Kind::self: break;
  }
  return *this;
}

Communicator& NcclCommunicator::groups(int k, GroupSide side) {
  const int color = group_color(rank_, size_, k, side);
  const bool within = side == GroupSide::within;
  if (kind_ == Kind::self || k == (within ? size_ : 1)) return *this;
  if (k == (within ? 1 : size_)) return self_communicator();
  ST_CHECK(kind_ == Kind::world, "comm '{}': groups() splits the world communicator only", name_);
  std::lock_guard lock(sub_mu_);
  std::unique_ptr<NcclCommunicator>& sub = groups_[{k, side}];
  if (!sub) {
    MPI_Comm group;
    check_mpi(MPI_Comm_split(mpi_, color, rank_, &group), "MPI_Comm_split");
    sub.reset(&split(group, color, within ? Kind::group : Kind::cross_group));
    sub->mpi_ = group;  // the group's to free
  }
  return *sub;
}

// ---- shutdown -----------------------------------------------------------------

void NcclCommunicator::shutdown() {
  {
    std::lock_guard lock(issue_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    if (in_group_) {  // an open group: close it so that its collectives run
      in_group_ = false;
      nccl().GroupEnd();
      for (auto& p : group_) cudaEventRecord(p.done, cuda::comm_stream());
      std::lock_guard plock(mu_);
      for (auto& p : group_) pending_.push_back(std::move(p));
      group_.clear();
    }
  }
  {
    std::lock_guard lock(sub_mu_);
    for (auto* sub : {&node_, &cross_, &self_})
      if (*sub) (*sub)->shutdown();
    for (auto& [key, sub] : groups_) sub->shutdown();
  }
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();  // it drains what is in flight first
  {
    std::lock_guard lock(mu_);
    retired_.clear();
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    free_events_.clear();
  }
  barrier_buffer_ = Tensor();
  if (ready_) cudaEventDestroy(ready_);
  ready_ = nullptr;
  if (comm_) nccl().CommDestroy(comm_);
  comm_ = nullptr;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    for (MPI_Comm* c : {&mpi_node_, &mpi_cross_, &mpi_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  if (kind_ == Kind::world && watchdog_) watchdog_->stop();
}

NcclCommunicator::~NcclCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) shutdown();
  if (kind_ == Kind::world) cancel_shutdown_at_mpi_finalize(this);
}

// ---- issuing ------------------------------------------------------------------

void NcclCommunicator::check_device(const char* what, const Tensor& t) const {
  ST_CHECK(t.defined(), "comm '{}' (nccl): {} of an undefined tensor", name_, what);
  ST_CHECK(t.device() == Device::cuda(device_), "comm '{}' (nccl): {}: the tensor must be on cuda:{}, not {}", name_,
           what, device_, t.device().str());
}

void NcclCommunicator::check_reducible(const char* what, const Tensor& t) const {
  check_device(what, t);
  ST_CHECK(t.dtype() != DType::i32, "comm '{}': {} reduces f32 or bf16 tensors, not i32", name_, what);
  ST_CHECK(t.dtype() != DType::bf16 || nccl().has_bf16(), "comm '{}': {} of bf16 needs NCCL >= 2.10, not {}", name_,
           what, nccl().version_string());
}

ncclRedOp_t NcclCommunicator::reduce_op(ReduceOp op) const {
  if (op == ReduceOp::sum) return ncclSum;
  ST_CHECK(nccl().has_avg(), "comm '{}': ReduceOp::avg needs NCCL >= 2.10 (ncclAvg), this is {}", name_,
           nccl().version_string());
  return ncclAvg;
}

cudaEvent_t NcclCommunicator::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

WorkPtr NcclCommunicator::issue(OpCode op, const Tensor& a, const Tensor& b, int root, int64_t bytes,
                                const Launch& launch) {
  std::vector<Pending> drop;  // completed collectives: their tensors are released here, on the issuing thread
  Pending p;
  p.record.op = op;
  p.record.bytes = bytes;
  p.record.dtype = a.defined() ? a.dtype() : DType::f32;
  p.record.root = root;
  std::strncpy(p.record.algorithm, "nccl", sizeof(p.record.algorithm) - 1);
  p.a = a;
  p.b = b;
  {
    std::lock_guard lock(mu_);
    drop.swap(retired_);
    p.start = take_event();
    p.done = take_event();
    if (!poller_.joinable()) poller_ = std::thread([this] { poll_loop(); });
  }
  drop.clear();

  std::unique_lock lock(issue_mu_);
  // Being aborted (a collective failed or timed out): nothing may be issued on
  // the communicator any more, and the watchdog is ending the job. Wait
  // without the lock, which the abort itself takes (abort_nccl).
  while (aborting_.load()) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    lock.lock();
  }
  ST_CHECK(!shut_down_, "comm '{}': {} after the communicator was shut down", name_, op_name(op));
  p.record.seq = next_seq_++;
  p.work = std::make_shared<Work>(op_name(op), p.record.seq, bytes);
  WorkPtr work = p.work;
  monitor_->issued(p.record);
  try {
    const cudaStream_t compute = cuda::compute_stream(), comm = cuda::comm_stream();
    ST_CUDA_CHECK(cudaEventRecord(ready_, compute));
    ST_CUDA_CHECK(cudaStreamWaitEvent(comm, ready_, 0));
    // Inside a group the collective runs only from end_group on, after the
    // waits for every member's input: its start is recorded there, or it
    // would count the backward of the group's later buckets as its time
    // (and toward comm.timeout_s).
    if (!in_group_) ST_CUDA_CHECK(cudaEventRecord(p.start, comm));
    // [debug] slow_comm_ms: the collective starts late on the GPU, as the MPI
    // backend's engine starts it late on the host (not inside a group,
    // whose collectives launch together at end_group). Unlike there, the
    // delay lies after the start event, so it counts in this collective's
    // time (and toward comm.timeout_s): what the watchdog test relies on.
    if (options_.debug_delay_s > 0 && !in_group_) cuda::sleep_on_stream(comm, options_.debug_delay_s);
    ST_NCCL_CHECK(launch(comm));
    if (in_group_) {
      group_.push_back(std::move(p));
      return work;
    }
    ST_CUDA_CHECK(cudaEventRecord(p.done, comm));
  } catch (const std::exception& e) {
    // The other ranks may be inside this collective already: no way to go on.
    // (fail() aborts NCCL under issue_mu_, so this thread lets go of it.)
    lock.unlock();
    fail(p.record, fmt::format("failed: {}", e.what()));
  }
  {
    std::lock_guard plock(mu_);
    pending_.push_back(std::move(p));
  }
  cv_.notify_one();
  return work;
}

void NcclCommunicator::begin_group() {
  std::lock_guard lock(issue_mu_);
  ST_CHECK(!in_group_, "comm '{}': begin_group inside an open group", name_);
  ST_NCCL_CHECK(nccl().GroupStart());
  in_group_ = true;
}

void NcclCommunicator::end_group() {
  std::vector<Pending> group;
  {
    std::unique_lock lock(issue_mu_);
    ST_CHECK(in_group_, "comm '{}': end_group without begin_group", name_);
    in_group_ = false;
    group.swap(group_);
    try {
      for (auto& p : group) ST_CUDA_CHECK(cudaEventRecord(p.start, cuda::comm_stream()));
      ST_NCCL_CHECK(nccl().GroupEnd());
      for (auto& p : group) ST_CUDA_CHECK(cudaEventRecord(p.done, cuda::comm_stream()));
    } catch (const std::exception& e) {
      OpRecord op;
      if (!group.empty()) op = group.front().record;
      lock.unlock();  // fail() aborts NCCL under issue_mu_
      fail(op, fmt::format("failed: {}", e.what()));
    }
    std::lock_guard plock(mu_);
    for (auto& p : group) pending_.push_back(std::move(p));
  }
  cv_.notify_one();
}

WorkPtr NcclCommunicator::allreduce(const Tensor& t, ReduceOp op) {
  check_reducible("allreduce", t);
  const ncclRedOp_t rop = reduce_op(op);
  void* buf = t.raw();
  const size_t n = size_t(t.numel());
  const ncclDataType_t dt = nccl_dtype(t.dtype());
  return issue(OpCode::allreduce, t, Tensor(), -1, int64_t(t.nbytes()),
               [=, this](cudaStream_t s) { return nccl().AllReduce(buf, buf, n, dt, rop, comm_, s); });
}

WorkPtr NcclCommunicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_reducible("reduce_scatter", in);
  check_reducible("reduce_scatter", out);
  check_reduce_scatter_args(name_, in, out, rank_, size_);
  const ncclRedOp_t rop = reduce_op(op);
  const void* src = in.raw();
  void* dst = out.raw();
  const size_t n = size_t(out.numel());
  const ncclDataType_t dt = nccl_dtype(in.dtype());
  return issue(OpCode::reduce_scatter, in, out, -1, int64_t(in.nbytes()),
               [=, this](cudaStream_t s) { return nccl().ReduceScatter(src, dst, n, dt, rop, comm_, s); });
}

WorkPtr NcclCommunicator::allgather(const Tensor& in, const Tensor& out) {
  check_device("allgather", in);
  check_device("allgather", out);
  check_allgather_args(name_, in, out, rank_, size_);
  const void* src = in.raw();
  void* dst = out.raw();
  const size_t n = size_t(in.numel());
  const ncclDataType_t dt = nccl_dtype(in.dtype());
  return issue(OpCode::allgather, in, out, -1, int64_t(in.nbytes()),
               [=, this](cudaStream_t s) { return nccl().AllGather(src, dst, n, dt, comm_, s); });
}

WorkPtr NcclCommunicator::broadcast(const Tensor& t, int root) {
  check_device("broadcast", t);
  ST_CHECK(root >= 0 && root < size_, "comm '{}': broadcast from rank {} of {}", name_, root, size_);
  void* buf = t.raw();
  const size_t n = size_t(t.numel());
  const ncclDataType_t dt = nccl_dtype(t.dtype());
  return issue(OpCode::broadcast, t, Tensor(), root, int64_t(t.nbytes()),
               [=, this](cudaStream_t s) { return nccl().Broadcast(buf, buf, n, dt, root, comm_, s); });
}

WorkPtr NcclCommunicator::barrier() {
  {
    std::lock_guard lock(issue_mu_);
    ST_CHECK(!in_group_, "comm '{}': barrier inside an open group would never return", name_);
    if (!barrier_buffer_.defined()) barrier_buffer_ = Tensor::zeros({1}, DType::f32, Device::cuda(device_));
  }
  void* buf = barrier_buffer_.raw();
  WorkPtr work = issue(OpCode::barrier, barrier_buffer_, Tensor(), -1, 0, [=, this](cudaStream_t s) {
    return nccl().AllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm_, s);
  });
  work->wait();
  return work;
}

// ---- completion -----------------------------------------------------------------

void NcclCommunicator::poll_loop() {
  cudaSetDevice(device_);
  prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: the 20 us polling sleeps would otherwise take ~70 us
  double last_async_check = 0;
  std::unique_lock lock(mu_);
  for (;;) {
    if (pending_.empty()) {
      if (stop_) return;
      cv_.wait_for(lock, kIdleWake, [&] { return stop_ || !pending_.empty(); });
      lock.unlock();
      check_async_error();
      last_async_check = now_seconds();
      lock.lock();
      continue;
    }
    // Only this thread pops, and push_back keeps references to the front valid.
    Pending& p = pending_.front();
    lock.unlock();
    double now = now_seconds();
    if (!p.started) {
      const cudaError_t s = cudaEventQuery(p.start);
      if (s == cudaSuccess) {
        p.started = true;
        p.started_at = now;
        p.work->mark_started("nccl", now);
        monitor_->started(p.record, now);
      } else if (s != cudaErrorNotReady) {
        fail(p.record, fmt::format("failed: CUDA error {} while waiting for it", cudaGetErrorString(s)));
      }
    }
    bool done = false;
    if (p.started) {
      const cudaError_t s = cudaEventQuery(p.done);
      if (s == cudaSuccess) {
        done = true;
      } else if (s != cudaErrorNotReady) {
        fail(p.record, fmt::format("failed: CUDA error {} while waiting for it", cudaGetErrorString(s)));
      } else if (now - p.started_at > options_.timeout_s) {
        fail(p.record, fmt::format("not complete after {:.1f} s", now - p.started_at));
      }
    }
    if (now - last_async_check >= kAsyncCheckEvery_s) {
      check_async_error();
      last_async_check = now;
    }
    if (done) {
      now = now_seconds();
      monitor_->finished(p.record);
      p.work->mark_finished(now);
      lock.lock();
      free_events_.push_back(p.start);
      free_events_.push_back(p.done);
      p.work.reset();
      retired_.push_back(std::move(p));
      pending_.pop_front();
      continue;  // the next one may be done too
    }
    std::this_thread::sleep_for(kPoll);
    lock.lock();
  }
}

void NcclCommunicator::check_async_error() {
  if (!comm_) return;
  ncclResult_t err = ncclSuccess;
  if (nccl().CommGetAsyncError(comm_, &err) != ncclSuccess) return;
  if (err == ncclSuccess || err == ncclInProgress) return;
  OpRecord op;
  {
    std::lock_guard lock(mu_);
    if (!pending_.empty()) op = pending_.front().record;
  }
  fail(op, fmt::format("failed: NCCL asynchronous error {} ({})", int(err), nccl().GetErrorString(err)));
}

// ncclCommAbort on a helper thread, waited for a bounded time: it unblocks
// NCCL's kernels (peers that will never arrive) and frees its resources; if
// it hangs itself, the job ends without it.
void NcclCommunicator::abort_nccl() {
  std::call_once(abort_once_, [this] {
    if (!comm_) return;
    aborting_ = true;
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> f = done->get_future();
    ncclComm_t c = comm_;
    // Under issue_mu_: never while the training thread launches on the
    // communicator (one stuck inside a launch keeps the lock: then the job
    // ends after the bounded wait below, without the abort).
    std::thread([this, c, done] {
      std::lock_guard lock(issue_mu_);
      nccl().CommAbort(c);
      done->set_value();
    }).detach();
    f.wait_for(std::chrono::duration<double>(kAbortWait_s));
  });
}

void NcclCommunicator::fail(const OpRecord& op, const std::string& what) {
  abort_nccl();
  if (watchdog_) watchdog_->fail(*monitor_, op, what);  // reports and ends the job
  std::fprintf(stderr, "shardtrain: comm '%s' (nccl): %s; aborting the job\n", name_.c_str(), what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm world, int device, const CommOptions& options) {
  return NcclCommunicator::make_world(world, device, options);
}

// ---- runtime/comm/gpu_backend.h ---------------------------------------------------

bool gpu_comm_backend_built() { return true; }

bool nccl_loadable(std::string* why) { return nccl_available(why); }

std::string nccl_loaded_version(std::string* why) {
  if (!nccl_available(why)) return {};
  return nccl().version_string() + " (" + nccl().path + ")";
}

std::unique_ptr<Communicator> make_nccl_world_communicator(int device, const CommOptions& options) {
  return NcclCommunicator::make_world(MPI_COMM_WORLD, device, options);
}

}  // namespace shardtrain::comm
