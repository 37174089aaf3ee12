#include "kernels/cuda/cublas_library.h"

#include "runtime/core/error.h"
#include "runtime/core/shared_library.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>
#include <vector>

namespace shardtrain::cuda {
namespace {

// The soname, then the same file beside the CUDA runtime this binary is
// linked to (a toolkit's lib folder, which the binary's RUNPATH named for
// the runtime but no longer needs to name for cuBLAS).
std::vector<std::string> candidates(const std::string& soname) {
  std::vector<std::string> out{soname};
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    const std::string runtime = info.dli_fname;
    const size_t slash = runtime.rfind('/');
    if (slash != std::string::npos) out.push_back(runtime.substr(0, slash + 1) + soname);
  }
  return out;
}

struct Loaded {
  CublasLibrary api;
  std::string error;  // empty when loaded
};

Loaded load() {
  Loaded out;
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  for (const char* name : {"libcublasLt.so.", "libcublas.so."}) {
    SharedLibrary so(candidates(name + major));
    if (!so.loaded()) {
      out.error = fmt::format(
          "cuBLAS ({}{}) not found: {}; install the CUDA toolkit's cuBLAS (or PyTorch's pip package, "
          "site-packages/nvidia/cublas/lib) and set LD_LIBRARY_PATH to its folder",
          name, major, so.error());
      return out;
    }
    CublasLibrary& a = out.api;
    if (std::string(name) == "libcublasLt.so.") {
      so.resolve("cublasLtCreate", a.LtCreate);
      so.resolve("cublasLtMatmulDescCreate", a.LtMatmulDescCreate);
      so.resolve("cublasLtMatmulDescSetAttribute", a.LtMatmulDescSetAttribute);
      so.resolve("cublasLtMatrixLayoutCreate", a.LtMatrixLayoutCreate);
      so.resolve("cublasLtMatmulPreferenceCreate", a.LtMatmulPreferenceCreate);
      so.resolve("cublasLtMatmulPreferenceSetAttribute", a.LtMatmulPreferenceSetAttribute);
      so.resolve("cublasLtMatmulPreferenceDestroy", a.LtMatmulPreferenceDestroy);
      so.resolve("cublasLtMatmulAlgoGetHeuristic", a.LtMatmulAlgoGetHeuristic);
      so.resolve("cublasLtMatmul", a.LtMatmul);
    } else {
      so.resolve("cublasCreate_v2", a.Create);
      so.resolve("cublasSetStream_v2", a.SetStream);
      so.resolve("cublasSetWorkspace_v2", a.SetWorkspace);
      so.resolve("cublasSetPointerMode_v2", a.SetPointerMode);
      so.resolve("cublasSetMathMode", a.SetMathMode);
      so.resolve("cublasGetStatusString", a.GetStatusString);
      so.resolve("cublasGemmEx", a.GemmEx);
      so.resolve("cublasGemmStridedBatchedEx", a.GemmStridedBatchedEx);
    }
    if (!so.error().empty()) {
      out.error = fmt::format("cuBLAS: {}", so.error());
      return out;
    }
  }
  return out;
}

}  // namespace

const CublasLibrary& cublas_api() {
  static const Loaded loaded = load();  // thread-safe initialization
  ST_CHECK(loaded.error.empty(), "{}", loaded.error);
  return loaded.api;
}

}  // namespace shardtrain::cuda
