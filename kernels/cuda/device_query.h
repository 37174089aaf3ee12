// What CUDA devices this process sees. Compiled only when the CUDA backend is
// built; callers go through kernels/ops.h, which answers "none" otherwise.
#pragma once

#include <string>
#include <vector>

namespace shardtrain::cuda {

struct DeviceInfo {
  int index;
  std::string name;
  int compute_major, compute_minor;
  size_t total_memory_bytes;
};

// Devices visible to this process; empty when there is no driver or no GPU
// (never an error: a CPU-only node is a normal place to run). `why_none`
// receives the CUDA runtime's reason when the list is empty.
std::vector<DeviceInfo> visible_devices(std::string* why_none = nullptr);

}  // namespace shardtrain::cuda
