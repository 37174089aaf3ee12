// GEMMs with a fused epilogue through cuBLASLt, for the linear layers: the
// bias added to every row of the product, or the bias gradient (the column
// sums of the output gradient) computed by the same GEMM that computes the
// weight gradient; the GELU after a linear layer, and its gradient before
// the next one's input gradient leaves the GEMM. The row-major contract of gemm.h:
//   C[M,N] = op(A)[M,K] * op(B)[K,N] + beta * C, then the epilogue
// at the precision of gemm_precision() (bf16: A and B packed as in gemm.h),
// f32 C (or, with packed operands, bf16 C), on the compute stream, with a
// 32 MiB workspace.
//
// Returns false, having issued nothing, where cuBLASLt offers no algorithm
// for the case (an epilogue it does not support with these types or
// layouts) or the bias vector is not 16-byte aligned: the caller then runs gemm() and its separate kernels, the
// reference path. Plans (descriptors and the heuristic's algorithm) are kept
// per shape, so a step's recurring GEMMs ask the heuristic once.
#pragma once

#include "kernels/cuda/gemm.h"

#include <cstdint>

namespace shardtrain::cuda {

// The GELU is the tanh approximation, GPT-2's and kernels/cpu/activation's.
// `aux` is an [M, N] matrix of C's type with row stride N.
enum class LtEpilogue {
  none,
  bias,           // C[m, n] += bias[n] (bias: N floats)
  bias_grad_a,    // bias[m] = sum over k of op(A)[m, k] (M floats), overwritten
  gelu_aux_bias,  // aux = product + bias[n] (the GELU's input), C = gelu(aux)
  dgelu           // C = product * gelu'(aux) (aux: the forward's GELU input)
};

bool gemm_lt(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float beta, float* C, int64_t ldc, LtEpilogue epilogue, float* bias, float* aux = nullptr);

// gemm_lt on operands that are bf16 copies already (gemm.h gemm_packed).
// With c_bf16, C and aux hold bf16 values (beta must be 0): mixed
// precision's bf16 activations straight from the GEMM's epilogue.
bool gemm_lt_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const GemmOperand& a,
                    const GemmOperand& b, float beta, void* C, int64_t ldc, LtEpilogue epilogue, float* bias,
                    void* aux = nullptr, bool c_bf16 = false);

// How many plans were made and how many calls found no algorithm (for the
// GPU check: after warm-up neither grows).
struct LtStats {
  int64_t plans = 0, unsupported = 0, calls = 0;
};
LtStats gemm_lt_stats();

}  // namespace shardtrain::cuda
