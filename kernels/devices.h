// Which accelerators this build and this process can use. Answers "none" in a
// build without the CUDA backend, so callers need no #ifdefs.
#pragma once

#include <string>
#include <vector>

namespace shardtrain {

struct AcceleratorInfo {
  int index;
  std::string name;
  std::string compute_capability;  // "9.0"
  size_t total_memory_bytes;
};

bool cuda_backend_built();
// Visible CUDA devices; empty (with the reason in *why_none) when there are none.
std::vector<AcceleratorInfo> cuda_devices(std::string* why_none = nullptr);

}  // namespace shardtrain
