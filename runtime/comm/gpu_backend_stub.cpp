// runtime/comm/gpu_backend.h in builds without shardtrain_comm_gpu (no CUDA
// backend, or no nccl.h): the factories fail with an Error.
#include "runtime/comm/gpu_backend.h"

#if !defined(SHARDTRAIN_COMM_GPU)

#include "runtime/core/error.h"

namespace shardtrain::comm {

bool gpu_comm_backend_built() { return false; }

bool nccl_loadable(std::string* why) {
  if (why) *why = "this build has no NCCL backend";
  return false;
}

std::string nccl_loaded_version(std::string* why) {
  nccl_loadable(why);
  return {};
}

int device_for_local_rank(int local_rank) {
  ST_CHECK(false, "no CUDA device for node-local rank {}: this build has no CUDA backend", local_rank);
  return 0;
}

std::unique_ptr<Communicator> make_nccl_world_communicator(int, const CommOptions&) {
  ST_CHECK(false, "the NCCL communicator is not in this build (built without the CUDA backend or without nccl.h)");
  return nullptr;
}

std::unique_ptr<Communicator> make_device_mpi_world_communicator(int, const CommOptions&) {
  ST_CHECK(false, "the device MPI communicator is not in this build (built without the CUDA backend)");
  return nullptr;
}

std::string device_mpi_mode(const Communicator&) { return {}; }

}  // namespace shardtrain::comm

#endif
