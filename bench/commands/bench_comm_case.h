// One collective at one size for `shardtrain bench comm`: its buffers (a few
// sets, used in turn), shardtrain's operation on a communicator and the MPI
// library's own, and the check of every result (bench_comm.cpp measures,
// bench_comm_tune.cpp picks the fastest algorithm).
#pragma once

#include "runtime/comm/algorithms/mpi_native.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/engine/scratch.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

namespace shardtrain::comm::cases {

// Inputs are small integers, so every sum is exact in f32 and bf16 (up to 32
// ranks) whatever the order of additions: a result is right or wrong, with
// no tolerance.
inline float pattern(int rank, int64_t i) { return float(int((i * 7 + int64_t(rank) * 13) % 17) - 8); }

inline void put(const Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::bf16)
    t.bf16_data()[i] = to_bf16(v);
  else
    t.f32()[i] = v;
}
inline float get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::bf16 ? to_f32(t.bf16_data()[i]) : t.f32()[i];
}

// One collective at one size: its buffers (`buffers` sets of them, used in
// turn), both implementations, the check.
class Case {
 public:
  Case(std::string op, int64_t bytes, int buffers, DType dtype, Communicator& comm, MpiNative& native, Scratch& scratch)
      : op_(std::move(op)), dtype_(dtype), comm_(&comm), native_(native), scratch_(scratch) {
    const int p = comm.size();
    const int64_t elems = std::max<int64_t>(bytes / int64_t(dtype_size(dtype)), p);
    const int64_t per = elems / p;
    for (int i = 0; i < buffers; ++i) {
      if (op_ == "allreduce" || op_ == "broadcast") {
        a_.push_back(Tensor::empty({elems}, dtype));
      } else if (op_ == "reduce_scatter") {
        a_.push_back(Tensor::empty({per * p}, dtype));
        b_.push_back(Tensor::empty({per}, dtype));
      } else if (op_ == "allgather") {
        a_.push_back(Tensor::empty({per}, dtype));
        b_.push_back(Tensor::empty({per * p}, dtype));
      } else {
        throw Error(fmt::format("bench comm: unknown op '{}' (allreduce, reduce_scatter, allgather, broadcast)", op_));
      }
    }
  }

  // The size as nccl-tests count it, and its bus-bandwidth factor.
  int64_t bytes() const { return int64_t(op_ == "allgather" ? b_[0].nbytes() : a_[0].nbytes()); }
  double bus_factor() const {
    const double n = comm_->size();
    if (op_ == "allreduce") return 2 * (n - 1) / n;
    if (op_ == "broadcast") return 1;
    return (n - 1) / n;
  }

  // zeros: the all-reduce's timed runs, whose input is their own output (sums
  // of patterns would grow by a factor p per run); the result stays 0.
  void fill(bool zeros) {
    const int r = comm_->rank();
    zeros_ = zeros && op_ == "allreduce";
    for (const Tensor& a : a_)
      for (int64_t i = 0; i < a.numel(); ++i)
        put(a, i, zeros_ ? 0.0f : op_ == "broadcast" && r != 0 ? -99.0f : pattern(r, i));
    for (const Tensor& b : b_)
      for (int64_t i = 0; i < b.numel(); ++i) put(b, i, -99.0f);
  }

  // Runs the operations on `comm` from now on: another communicator over
  // the same ranks (`bench comm --tune-algorithms`: one per algorithm).
  void use(Communicator& comm) { comm_ = &comm; }

  // Operation k runs on buffer set k % buffers.
  WorkPtr run_shardtrain(int k) {
    const Tensor& a = a_[size_t(k) % a_.size()];
    const Tensor& b = b_.empty() ? a : b_[size_t(k) % b_.size()];
    if (op_ == "allreduce") return comm_->allreduce(a, ReduceOp::sum);
    if (op_ == "reduce_scatter") return comm_->reduce_scatter(a, b, ReduceOp::sum);
    if (op_ == "allgather") return comm_->allgather(a, b);
    return comm_->broadcast(a, 0);
  }

  void run_mpi(int k) {
    const Tensor& a = a_[size_t(k) % a_.size()];
    const Tensor& b = b_.empty() ? a : b_[size_t(k) % b_.size()];
    if (op_ == "allreduce")
      native_.allreduce(a.raw(), a.numel(), dtype_, 1.0f);
    else if (op_ == "reduce_scatter")
      native_.reduce_scatter(a.raw(), b.raw(), b.numel(), dtype_, 1.0f, scratch_);
    else if (op_ == "allgather")
      native_.allgather(a.raw(), b.raw(), a.numel(), dtype_);
    else
      native_.broadcast(a.raw(), int64_t(a.nbytes()), 0);
  }

  // Every buffer set that has run at least once (the first `used`).
  bool check(int used) const {
    for (size_t k = 0; k < std::min(a_.size(), size_t(used)); ++k)
      if (!check(a_[k], b_.empty() ? Tensor() : b_[k])) return false;
    return true;
  }

 private:
  bool check(const Tensor& a, const Tensor& b) const {
    const int p = comm_->size(), r = comm_->rank();
    if (op_ == "allreduce") {
      for (int64_t i = 0; i < a.numel(); ++i) {
        float want = 0;
        if (!zeros_)
          for (int k = 0; k < p; ++k) want += pattern(k, i);
        if (get(a, i) != want) return false;
      }
    } else if (op_ == "reduce_scatter") {
      for (int64_t j = 0; j < b.numel(); ++j) {
        float want = 0;
        for (int k = 0; k < p; ++k) want += pattern(k, r * b.numel() + j);
        if (get(b, j) != want) return false;
      }
    } else if (op_ == "allgather") {
      const int64_t per = a.numel();
      for (int64_t i = 0; i < b.numel(); ++i)
        if (get(b, i) != pattern(int(i / per), i % per)) return false;
    } else {
      for (int64_t i = 0; i < a.numel(); ++i)
        if (get(a, i) != pattern(0, i)) return false;
    }
    return true;
  }

  std::string op_;
  DType dtype_;
  Communicator* comm_;
  MpiNative& native_;
  Scratch& scratch_;
  std::vector<Tensor> a_, b_;
  bool zeros_ = false;
};

inline double max_over_ranks(double x, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, comm);
  return x;
}

inline bool all_ranks(bool ok, MPI_Comm comm) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
  return v != 0;
}

// Buffer sets cycled through at one size: 1 MiB in all, at most 16.
inline int buffers_for(int64_t bytes) { return int(std::clamp<int64_t>((int64_t(1) << 20) / bytes, 1, 16)); }

}  // namespace shardtrain::comm::cases
