#include "runtime/comm/algorithms/reduce_scatter_shm.h"

#include "runtime/comm/algorithms/reduction.h"
#include "runtime/comm/algorithms/shm_step.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace shardtrain::comm {

double reduce_scatter_shm(ShmWindow& window, int64_t& step, int64_t seq, DType dtype, const void* in, void* out,
                          int64_t count, float scale, const BackoffPolicy& policy) {
  const int p = window.size(), rank = window.rank();
  const int64_t elem = int64_t(dtype_size(dtype));
  const int64_t segment = count * elem;
  // Each segment's share of a half, whole cache lines (64 is a multiple of
  // every element size).
  const int64_t share = ShmStep::kHalfBytes / p / 64 * 64;
  const auto* input = static_cast<const std::byte*>(in);
  std::vector<const void*> sources(static_cast<size_t>(p));
  double arrived_at = 0;
  int64_t offset = 0;
  do {  // at least one step, so that an empty collective still meets its peers
    const int64_t length = std::min(share, segment - offset);
    ShmStep s(window, step, seq, OpCode::reduce_scatter, policy);
    s.wait_free();
    std::byte* mine = s.half(rank);
    for (int k = 0; k < p; ++k)
      if (length > 0) std::memcpy(mine + k * length, input + k * segment + offset, size_t(length));
    const double t =
        s.arrive({seq, segment * p, offset, length, scale, uint8_t(dtype), uint8_t(OpCode::reduce_scatter), {}});
    if (offset == 0) arrived_at = t;
    for (int r = 0; r < p; ++r) sources[size_t(r)] = s.half(r) + rank * length;
    reduce_sum_ordered(dtype, static_cast<std::byte*>(out) + offset, sources.data(), p, length / elem, scale);
    s.done();
    offset += length;
  } while (offset < segment);
  return arrived_at;
}

}  // namespace shardtrain::comm
