// Reduce-scatter through shared memory, for communicators whose ranks all
// live on one node (ShmWindow): every rank copies its whole input into its
// area, and once every rank has, rank k adds up segment k of the p areas in
// rank order 0 .. p-1 (the average's scale fused into the last addition)
// straight into its output. One wait for the other ranks per step, and no
// MPI call; the sum is the one-shot's, in the same order.
//
// A step carries up to ShmStep::kHalfBytes / p of each segment (whole cache
// lines): a larger input goes in as many steps.
#pragma once

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/transport/shm_window.h"
#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::comm {

// `in`: p segments of `count` elements; `out`: this rank's segment of the sum
// (may be `in`'s own segment). `step`: the communicator's step counter.
// Returns when every rank had arrived at the first step.
double reduce_scatter_shm(ShmWindow& window, int64_t& step, int64_t seq, DType dtype, const void* in, void* out,
                          int64_t count, float scale, const BackoffPolicy& policy);

}  // namespace shardtrain::comm
