// A kernel that holds a stream for a given time: fault injection on the GPU.
// The NCCL communicator queues it before each collective on the comm stream
// when CommOptions::debug_delay_s is set ([debug] slow_comm_ms), so that this
// rank's collectives reach the other ranks late and take longer on this rank,
// as the MPI backend's delay does on the host; with a delay past
// comm.timeout_s it stands for a collective that never completes, which the
// NCCL watchdog test uses (tests/gpu/comm_nccl_watchdog_test.cpp).
#pragma once

#include <cuda_runtime.h>

namespace shardtrain::cuda {

// One thread waits `seconds` of the GPU's global timer (sleeping in steps of
// at most 100 us); the launch returns at once.
void sleep_on_stream(cudaStream_t stream, double seconds);

}  // namespace shardtrain::cuda
