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

// Why `so` (opened as `soname`) cannot serve, after its lookups; empty when
// it can.
std::string why_not(const SharedLibrary& so, const std::string& soname) {
  if (!so.loaded())
    return fmt::format(
        "cuBLAS ({}) not found: {}; install the CUDA toolkit's cuBLAS (or PyTorch's pip package, "
        "site-packages/nvidia/cublas/lib) and set LD_LIBRARY_PATH to its folder",
        soname, so.error());
  return so.error().empty() ? std::string() : fmt::format("cuBLAS: {}", so.error());
}

Loaded load() {
  Loaded out;
  CublasLibrary& a = out.api;
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  // cuBLASLt first: libcublas needs it.
  const std::string lt_name = "libcublasLt.so." + major;
  SharedLibrary lt(candidates(lt_name));
  lt.resolve("cublasLtCreate", a.LtCreate);
  lt.resolve("cublasLtMatmulDescCreate", a.LtMatmulDescCreate);
  lt.resolve("cublasLtMatmulDescSetAttribute", a.LtMatmulDescSetAttribute);
  lt.resolve("cublasLtMatrixLayoutCreate", a.LtMatrixLayoutCreate);
  lt.resolve("cublasLtMatmulPreferenceCreate", a.LtMatmulPreferenceCreate);
  lt.resolve("cublasLtMatmulPreferenceSetAttribute", a.LtMatmulPreferenceSetAttribute);
  lt.resolve("cublasLtMatmulPreferenceDestroy", a.LtMatmulPreferenceDestroy);
  lt.resolve("cublasLtMatmulAlgoGetHeuristic", a.LtMatmulAlgoGetHeuristic);
  lt.resolve("cublasLtMatmul", a.LtMatmul);
  out.error = why_not(lt, lt_name);
  if (!out.error.empty()) return out;
  const std::string blas_name = "libcublas.so." + major;
  SharedLibrary blas(candidates(blas_name));
  blas.resolve("cublasCreate_v2", a.Create);
  blas.resolve("cublasSetStream_v2", a.SetStream);
  blas.resolve("cublasSetWorkspace_v2", a.SetWorkspace);
  blas.resolve("cublasSetPointerMode_v2", a.SetPointerMode);
  blas.resolve("cublasSetMathMode", a.SetMathMode);
  blas.resolve("cublasGetStatusString", a.GetStatusString);
  blas.resolve("cublasGemmEx", a.GemmEx);
  blas.resolve("cublasGemmStridedBatchedEx", a.GemmStridedBatchedEx);
  out.error = why_not(blas, blas_name);
  return out;
}

}  // namespace

const CublasLibrary& cublas_api() {
  static const Loaded loaded = load();  // thread-safe initialization
  ST_CHECK(loaded.error.empty(), "{}", loaded.error);
  return loaded.api;
}

}  // namespace shardtrain::cuda
