#include "runtime/comm/algorithms/allgather_oneshot.h"

#include "runtime/comm/algorithms/oneshot_exchange.h"

#include <cstring>

namespace shardtrain::comm {

double allgather_oneshot(MpiTransport& transport, int64_t seq, DType dtype, const void* in, void* out, int64_t count,
                         Scratch& scratch, std::vector<MpiTransport::Request>& requests) {
  const int p = transport.size(), me = transport.rank();
  const size_t segment = size_t(count) * dtype_size(dtype);
  auto* output = static_cast<std::byte*>(out);
  const OneshotHeader header = oneshot_header(OneshotOp::allgather, seq, int64_t(segment), dtype, 1.0f);
  OneshotExchange exchange(transport, header, int64_t(segment), /*same_for_all=*/true, scratch, requests);
  if (segment > 0) std::memcpy(exchange.outgoing(), in, segment);
  exchange.start();
  if (segment > 0 && output + size_t(me) * segment != in) std::memcpy(output + size_t(me) * segment, in, segment);
  const double arrived_at = exchange.finish();
  for (int peer = 0; peer < p; ++peer)
    if (peer != me && segment > 0) std::memcpy(output + size_t(peer) * segment, exchange.incoming(peer), segment);
  return arrived_at;
}

}  // namespace shardtrain::comm
