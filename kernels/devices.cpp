#include "kernels/devices.h"

#ifdef SHARDTRAIN_HAVE_CUDA
#include "kernels/cuda/device_query.h"
#endif

namespace shardtrain {

bool cuda_backend_built() {
#ifdef SHARDTRAIN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<AcceleratorInfo> cuda_devices(std::string* why_none) {
  std::vector<AcceleratorInfo> out;
#ifdef SHARDTRAIN_HAVE_CUDA
  for (const auto& d : cuda::visible_devices(why_none))
    out.push_back({d.index, d.name, std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor),
                   d.total_memory_bytes});
#else
  if (why_none) *why_none = "this build has no CUDA backend (configure found no nvcc)";
#endif
  return out;
}

}  // namespace shardtrain
