// All-gather through shared memory, for communicators whose ranks all live
// on one node (ShmWindow): every rank copies its input into its area, and
// once every rank has, each copies the p areas into its output in rank
// order. One wait for the other ranks per step, and no MPI call.
//
// A step carries up to ShmStep::kHalfBytes of each rank's input: a larger
// one goes in as many steps.
#pragma once

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/transport/shm_window.h"
#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::comm {

// `in`: `count` elements; `out`: p x count, rank k's at k x count (`in` may be
// this rank's part of it). `step`: the communicator's step counter. Returns
// when every rank had arrived at the first step.
double allgather_shm(ShmWindow& window, int64_t& step, int64_t seq, DType dtype, const void* in, void* out,
                     int64_t count, const BackoffPolicy& policy);

}  // namespace shardtrain::comm
