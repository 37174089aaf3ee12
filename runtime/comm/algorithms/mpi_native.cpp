#include "runtime/comm/algorithms/mpi_native.h"

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/algorithms/reduction.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>

namespace shardtrain::comm {
namespace {

// inout = in + inout, bf16 as uint16 bits; f32 accumulation, one rounding.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) { reduce_sum(DType::bf16, inout, in, inout, *len, 1.0f); }

MPI_Op bf16_sum_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    check_mpi(MPI_Op_create(&bf16_sum, /*commute=*/1, &o), "MPI_Op_create");
    return o;
  }();
  return op;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::bf16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op sum_op(DType dtype) {
  ST_CHECK(dtype != DType::i32, "reductions take f32 or bf16 tensors, not i32");
  return dtype == DType::bf16 ? bf16_sum_op() : MPI_SUM;
}

int as_count(int64_t n) {
  ST_CHECK(n <= INT_MAX, "{} elements per rank exceed what one MPI call can move", n);
  return int(n);
}

}  // namespace

MpiNative::MpiNative(MPI_Comm comm, const BackoffPolicy* poll) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (poll) poll_ = *poll;
}

template <class Blocking, class Start>
void MpiNative::run(const char* what, Blocking&& blocking, Start&& start) {
  if (!poll_) return check_mpi(blocking(), what);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(start(&request), what);
  check_mpi(wait_backing_off(request, *poll_), what);
}

void MpiNative::allreduce(void* buf, int64_t numel, DType dtype, float scale) {
  // Element-wise, so a buffer beyond one call's count goes in pieces.
  const size_t elem = dtype_size(dtype);
  for (int64_t done = 0; done < numel;) {
    const int64_t n = std::min<int64_t>(numel - done, int64_t(1) << 30);
    void* part = static_cast<std::byte*>(buf) + size_t(done) * elem;
    run(
        "MPI_Allreduce",
        [&] { return MPI_Allreduce(MPI_IN_PLACE, part, int(n), mpi_type(dtype), sum_op(dtype), comm_); },
        [&](MPI_Request* r) {
          return MPI_Iallreduce(MPI_IN_PLACE, part, int(n), mpi_type(dtype), sum_op(dtype), comm_, r);
        });
    done += n;
  }
  scale_inplace(dtype, buf, numel, scale);
}

void MpiNative::reduce_scatter(const void* in, void* out, int64_t per_rank, DType dtype, float scale,
                               Scratch& scratch) {
  const size_t bytes = size_t(per_rank) * dtype_size(dtype);
  // MPI forbids send and receive buffers that overlap; MPI_IN_PLACE would put
  // the result at chunk 0 and clobber it. An aliased `out` goes through a
  // temporary.
  const auto* in_bytes = static_cast<const std::byte*>(in);
  const bool aliased = out == in_bytes + size_t(rank_) * bytes;
  void* dst = aliased ? scratch.get(kNativeTemp, bytes) : out;
  const int count = as_count(per_rank);
  run(
      "MPI_Reduce_scatter_block",
      [&] { return MPI_Reduce_scatter_block(in, dst, count, mpi_type(dtype), sum_op(dtype), comm_); },
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(in, dst, count, mpi_type(dtype), sum_op(dtype), comm_, r);
      });
  if (aliased && bytes > 0) std::memcpy(out, dst, bytes);
  scale_inplace(dtype, out, per_rank, scale);
}

void MpiNative::allgather(const void* in, void* out, int64_t per_rank, DType dtype) {
  const size_t bytes = size_t(per_rank) * dtype_size(dtype);
  const bool aliased = in == static_cast<std::byte*>(out) + size_t(rank_) * bytes;
  const void* send = aliased ? MPI_IN_PLACE : in;
  const int count = as_count(per_rank);
  run(
      "MPI_Allgather", [&] { return MPI_Allgather(send, count, mpi_type(dtype), out, count, mpi_type(dtype), comm_); },
      [&](MPI_Request* r) {
        return MPI_Iallgather(send, count, mpi_type(dtype), out, count, mpi_type(dtype), comm_, r);
      });
}

void MpiNative::broadcast(void* buf, int64_t bytes, int root) {
  for (int64_t done = 0; done < bytes;) {
    const int64_t n = std::min<int64_t>(bytes - done, int64_t(1) << 30);
    void* part = static_cast<std::byte*>(buf) + done;
    run(
        "MPI_Bcast", [&] { return MPI_Bcast(part, int(n), MPI_BYTE, root, comm_); },
        [&](MPI_Request* r) { return MPI_Ibcast(part, int(n), MPI_BYTE, root, comm_, r); });
    done += n;
  }
}

void MpiNative::barrier() {
  run(
      "MPI_Barrier", [&] { return MPI_Barrier(comm_); }, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
}

}  // namespace shardtrain::comm
