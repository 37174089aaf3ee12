#include "runtime/comm/algorithms/reduce_scatter_oneshot.h"

#include "runtime/comm/algorithms/oneshot_exchange.h"
#include "runtime/comm/algorithms/reduction.h"

#include <cstring>

namespace shardtrain::comm {

double reduce_scatter_oneshot(MpiTransport& transport, int64_t seq, DType dtype, const void* in, void* out,
                              int64_t count, float scale, Scratch& scratch,
                              std::vector<MpiTransport::Request>& requests) {
  const int p = transport.size(), me = transport.rank();
  const size_t segment = size_t(count) * dtype_size(dtype);
  const auto* input = static_cast<const std::byte*>(in);
  const OneshotHeader header = oneshot_header(OneshotOp::reduce_scatter, seq, int64_t(segment) * p, dtype, scale);
  OneshotExchange exchange(transport, header, int64_t(segment), /*same_for_all=*/false, scratch, requests);
  // Staged before anything is sent: `out` may be this rank's own segment of
  // `in`, which the addition below overwrites.
  for (int peer = 0; peer < p; ++peer)
    if (peer != me && segment > 0) std::memcpy(exchange.outgoing(peer), input + size_t(peer) * segment, segment);
  exchange.start();
  const double arrived_at = exchange.finish();
  std::vector<const void*> sources(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) sources[size_t(r)] = r == me ? input + size_t(me) * segment : exchange.incoming(r);
  reduce_sum_ordered(dtype, out, sources.data(), p, count, scale);
  return arrived_at;
}

}  // namespace shardtrain::comm
