// cuBLAS and cuBLASLt, loaded with dlopen at the first GPU GEMM context
// (init_device) rather than linked: some 600 MB of libraries that a linked
// binary maps and relocates at every start, CPU jobs included. Their
// headers are used for types and enums only; every call goes through
// cublas_api(). No fmt here: .cu files include it.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace shardtrain::cuda {

struct CublasLibrary {
  decltype(&::cublasCreate_v2) Create = nullptr;
  decltype(&::cublasSetStream_v2) SetStream = nullptr;
  decltype(&::cublasSetWorkspace_v2) SetWorkspace = nullptr;
  decltype(&::cublasSetPointerMode_v2) SetPointerMode = nullptr;
  decltype(&::cublasSetMathMode) SetMathMode = nullptr;
  decltype(&::cublasGetStatusString) GetStatusString = nullptr;
  // The overloads of the compute type as a cublasComputeType_t (C++ adds
  // ones that take a cudaDataType, so decltype cannot name them).
  cublasStatus_t (*GemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                           const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                           cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*GemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const void*, const void*, cudaDataType, int, long long, const void*,
                                         cudaDataType, int, long long, const void*, void*, cudaDataType, int, long long,
                                         int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasLtCreate) LtCreate = nullptr;
  decltype(&::cublasLtMatmulDescCreate) LtMatmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) LtMatmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) LtMatrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) LtMatmulPreferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) LtMatmulPreferenceSetAttribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) LtMatmulPreferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) LtMatmulAlgoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmul) LtMatmul = nullptr;
};

// The libraries of this build's cuBLAS major version (libcublasLt.so.N,
// libcublas.so.N), from the dynamic loader's path or else the folder the
// CUDA runtime was loaded from; loaded at the first call (thread-safe).
// Throws shardtrain::Error naming what is missing and LD_LIBRARY_PATH.
const CublasLibrary& cublas_api();

}  // namespace shardtrain::cuda
