// The GPU communication backends, reachable from CPU-only code: the NCCL
// communicator (runtime/comm/gpu/nccl_communicator.h) and the MPI backend for
// device tensors (runtime/comm/gpu/device_mpi_communicator.h). Both live in
// shardtrain_comm_gpu, built with the CUDA backend (and nccl.h); a program
// that uses them links shardtrain_comm_gpu when the target exists. In builds
// without it these functions are still defined (gpu_backend_stub.cpp): the
// factories throw an Error saying so, the group calls do nothing.
#pragma once

#include "runtime/comm/communicator.h"

#include <memory>
#include <string>

namespace shardtrain::comm {

// Whether this build has the GPU backends.
bool gpu_comm_backend_built();
// Whether libnccl.so.2 loads in this process (the reason in *why if not).
bool nccl_loadable(std::string* why = nullptr);
// "2.27.3 (/path/libnccl.so.2)" of the NCCL this process loads; "" (and the
// reason in *why) when it cannot.
std::string nccl_loaded_version(std::string* why = nullptr);

// The GPU for a rank: node-local rank % the number of visible CUDA devices.
int device_for_local_rank(int local_rank);

// NCCL over MPI_COMM_WORLD (collective; MPI initialized first), on cuda:`device`.
std::unique_ptr<Communicator> make_nccl_world_communicator(int device, const CommOptions& options);

// The MPI backend over MPI_COMM_WORLD taking tensors on cuda:`device` too
// (CUDA-aware MPI, or staged through pinned host memory).
std::unique_ptr<Communicator> make_device_mpi_world_communicator(int device, const CommOptions& options);
// Its mode ("cuda-aware" | "staged via pinned host"); "" for other communicators.
std::string device_mpi_mode(const Communicator& comm);

}  // namespace shardtrain::comm
