#include "runtime/comm/collective_args.h"

#include "runtime/core/error.h"

#include <algorithm>
#include <cstddef>

namespace shardtrain::comm {

bool overlap(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const std::byte*>(a.raw());
  const auto* pb = static_cast<const std::byte*>(b.raw());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

void check_reduce_scatter_args(const std::string& comm, const Tensor& in, const Tensor& out, int rank, int size) {
  ST_CHECK(in.dtype() == out.dtype(), "comm '{}': reduce_scatter from {} into {}", comm, dtype_name(in.dtype()),
           dtype_name(out.dtype()));
  ST_CHECK(in.numel() == out.numel() * size,
           "comm '{}': reduce_scatter of {} elements over {} ranks needs an output of {}, not {}", comm, in.numel(),
           size, in.numel() / std::max(1, size), out.numel());
  const auto* own = static_cast<const std::byte*>(in.raw()) + size_t(rank) * out.nbytes();
  ST_CHECK(own == out.raw() || !overlap(in, out),
           "comm '{}': reduce_scatter's output overlaps its input other than as this rank's chunk", comm);
}

void check_allgather_args(const std::string& comm, const Tensor& in, const Tensor& out, int rank, int size) {
  ST_CHECK(in.dtype() == out.dtype(), "comm '{}': allgather from {} into {}", comm, dtype_name(in.dtype()),
           dtype_name(out.dtype()));
  ST_CHECK(out.numel() == in.numel() * size,
           "comm '{}': allgather of {} elements from {} ranks needs an output of {}, not {}", comm, in.numel(), size,
           in.numel() * size, out.numel());
  const auto* own = static_cast<const std::byte*>(out.raw()) + size_t(rank) * in.nbytes();
  ST_CHECK(own == in.raw() || !overlap(in, out),
           "comm '{}': allgather's input overlaps its output other than as this rank's chunk", comm);
}

}  // namespace shardtrain::comm
