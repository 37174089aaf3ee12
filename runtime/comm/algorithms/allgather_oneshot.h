// One-shot all-gather for small buffers: every rank sends its segment to
// every other rank in one message (OneshotExchange) and copies each peer's
// into place: one message latency, the bytes of a ring.
#pragma once

#include "runtime/comm/engine/scratch.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/dtype.h"

#include <cstdint>
#include <vector>

namespace shardtrain::comm {

// `in`: this rank's `count` elements; `out`: p segments of `count` (`in` may
// be this rank's own). Returns when every peer's segment had arrived.
double allgather_oneshot(MpiTransport& transport, int64_t seq, DType dtype, const void* in, void* out, int64_t count,
                         Scratch& scratch, std::vector<MpiTransport::Request>& requests);

}  // namespace shardtrain::comm
