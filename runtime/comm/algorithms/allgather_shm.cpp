#include "runtime/comm/algorithms/allgather_shm.h"

#include "runtime/comm/algorithms/shm_step.h"

#include <algorithm>
#include <cstring>

namespace shardtrain::comm {

double allgather_shm(ShmWindow& window, int64_t& step, int64_t seq, DType dtype, const void* in, void* out,
                     int64_t count, const BackoffPolicy& policy) {
  const int p = window.size(), rank = window.rank();
  const int64_t part = count * int64_t(dtype_size(dtype));
  auto* output = static_cast<std::byte*>(out);
  double arrived_at = 0;
  int64_t offset = 0;
  do {  // at least one step, so that an empty collective still meets its peers
    const int64_t length = std::min(ShmStep::kHalfBytes, part - offset);
    ShmStep s(window, step, seq, OpCode::allgather, policy);
    s.wait_free();
    if (length > 0) std::memcpy(s.half(rank), static_cast<const std::byte*>(in) + offset, size_t(length));
    const double t = s.arrive({seq, part, offset, length, 1.0f, uint8_t(dtype), uint8_t(OpCode::allgather), {}});
    if (offset == 0) arrived_at = t;
    // Every part from the window, this rank's too: `in` may be that part of `out`.
    for (int k = 0; k < p; ++k)
      if (length > 0) std::memcpy(output + k * part + offset, s.half(k), size_t(length));
    s.done();
    offset += length;
  } while (offset < part);
  return arrived_at;
}

}  // namespace shardtrain::comm
