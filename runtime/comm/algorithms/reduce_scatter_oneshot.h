// One-shot reduce-scatter for small buffers: every rank sends segment k of its
// input straight to rank k (OneshotExchange, one message each way per peer)
// and adds the p copies of its own segment in rank order 0 .. p-1, the
// average's scale fused into the last addition: one message latency, the
// bytes of a ring, and every rank's segment summed in the same order whatever
// the rank (a ring sums segment k starting from rank k+1).
#pragma once

#include "runtime/comm/engine/scratch.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/dtype.h"

#include <cstdint>
#include <vector>

namespace shardtrain::comm {

// `in`: p segments of `count` elements; `out`: this rank's segment of the sum
// (may be `in`'s own segment). Returns when every peer's segment had arrived.
double reduce_scatter_oneshot(MpiTransport& transport, int64_t seq, DType dtype, const void* in, void* out,
                              int64_t count, float scale, Scratch& scratch,
                              std::vector<MpiTransport::Request>& requests);

}  // namespace shardtrain::comm
