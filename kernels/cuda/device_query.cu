#include "kernels/cuda/device_query.h"

#include <cuda_runtime.h>

namespace shardtrain::cuda {

std::vector<DeviceInfo> visible_devices(std::string* why_none) {
  std::vector<DeviceInfo> devices;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why_none) *why_none = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return devices;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    devices.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem});
  }
  if (devices.empty() && why_none) *why_none = "no CUDA device";
  return devices;
}

}  // namespace shardtrain::cuda
