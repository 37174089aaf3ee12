#include "kernels/cuda/cudnn/cudnn_library.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <mutex>

// The frontend's dynamic loading reads cuDNN's symbols through this handle,
// which the program defines and sets.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace shardtrain::cuda {
namespace {

constexpr const char* kSoname = "libcudnn.so.9";

struct Loaded {
  cudnnHandle_t handle = nullptr;
  std::string error;  // empty when loaded
};

Loaded load() {
  Loaded out;
  void* lib = dlopen(kSoname, RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    out.error = std::string("cuDNN (") + kSoname + ") not found: " + (why ? why : "dlopen failed") +
                "; PyTorch's pip packages ship it in site-packages/nvidia/cudnn/lib: add that folder to "
                "LD_LIBRARY_PATH";
    return out;
  }
  cudnn_frontend::cudnn_dlhandle = lib;
  // The frontend opens a CUDA runtime of its own for a few calls, trying
  // libcudart.so.12 first: it must be the one this program runs on.
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), /*overwrite=*/0);
  namespace detail = cudnn_frontend::detail;
  try {
    cudaStream_t stream = compute_stream();  // binds this thread to the process's device first
    const size_t version = detail::get_backend_version();
    if (version < 90000) {
      out.error = "cuDNN " + std::to_string(version) + " found; the fused attention needs cuDNN 9 or newer";
      return out;
    }
    cudnnHandle_t h = nullptr;
    if (detail::create_handle(&h) != CUDNN_STATUS_SUCCESS) {
      out.error = "cudnnCreate failed";
      return out;
    }
    if (detail::set_stream(h, stream) != CUDNN_STATUS_SUCCESS) {
      out.error = "cudnnSetStream failed";
      return out;
    }
    out.handle = h;  // lives as long as the process, like the library
  } catch (const std::exception& e) {
    out.error = std::string("cuDNN (") + kSoname + "): " + e.what();
  }
  return out;
}

}  // namespace

cudnnHandle_t cudnn_handle(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (loaded.handle == nullptr && why != nullptr) *why = loaded.error;
  return loaded.handle;
}

}  // namespace shardtrain::cuda
