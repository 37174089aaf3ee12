// cuDNN, opened with dlopen at first use rather than linked (as NCCL is,
// runtime/comm/gpu/nccl_library.h): the binary runs on a machine without
// cuDNN, or with it only inside PyTorch's pip packages, and uses it where it
// is found. The frontend's calls (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) go
// through the handle this opens.
#pragma once

#include <cudnn.h>

#include <string>

namespace shardtrain::cuda {

// The process's cuDNN handle, bound to the compute stream; nullptr, with the
// reason in *why, where cuDNN cannot be loaded or is older than 9.
cudnnHandle_t cudnn_handle(std::string* why);

}  // namespace shardtrain::cuda
