// cuBLAS opened with dlopen (kernels/cuda/cublas_library.h): where the
// toolkit's libraries are installed, every function the kernels call
// resolves, and a call that needs no device answers. Runs without a GPU
// (it opens the libraries only); skipped where they are not installed.
#include <gtest/gtest.h>

#ifdef SHARDTRAIN_HAVE_CUDA

#include "kernels/cuda/cublas_library.h"

#include "runtime/core/error.h"

#include <string>

namespace shardtrain::cuda {
namespace {

TEST(CublasLibrary, EveryFunctionResolvesAndAnswersWithoutADevice) {
  const CublasLibrary* api = nullptr;
  try {
    api = &cublas_api();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  for (const void* fn :
       {reinterpret_cast<const void*>(api->Create), reinterpret_cast<const void*>(api->SetStream),
        reinterpret_cast<const void*>(api->SetWorkspace), reinterpret_cast<const void*>(api->SetPointerMode),
        reinterpret_cast<const void*>(api->SetMathMode), reinterpret_cast<const void*>(api->GetStatusString),
        reinterpret_cast<const void*>(api->GemmEx), reinterpret_cast<const void*>(api->GemmStridedBatchedEx),
        reinterpret_cast<const void*>(api->LtCreate), reinterpret_cast<const void*>(api->LtMatmulDescCreate),
        reinterpret_cast<const void*>(api->LtMatmulDescSetAttribute),
        reinterpret_cast<const void*>(api->LtMatrixLayoutCreate),
        reinterpret_cast<const void*>(api->LtMatmulPreferenceCreate),
        reinterpret_cast<const void*>(api->LtMatmulPreferenceSetAttribute),
        reinterpret_cast<const void*>(api->LtMatmulPreferenceDestroy),
        reinterpret_cast<const void*>(api->LtMatmulAlgoGetHeuristic), reinterpret_cast<const void*>(api->LtMatmul)})
    EXPECT_NE(fn, nullptr);
  const std::string ok = api->GetStatusString(CUBLAS_STATUS_SUCCESS);
  const std::string bad = api->GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_FALSE(ok.empty());
  EXPECT_NE(ok, bad);
  EXPECT_EQ(&cublas_api(), api);  // loaded once
}

}  // namespace
}  // namespace shardtrain::cuda

#else  // no CUDA backend in this build: nothing to open

TEST(CublasLibrary, NeedsTheCudaBackend) { GTEST_SKIP() << "skipped: the CUDA backend is not built"; }

#endif
