// Row-major single-precision GEMM on the GPU through cuBLAS, the same
// contract as cpu::gemm (kernels/cpu/gemm.h):
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(X) is X or X^T as trans_* says; lda/ldb/ldc are the row strides of the
// matrices as stored. Pointers are device pointers; the work is issued on
// compute_stream() and is asynchronous to the host.
//
// The precision follows gemm_precision() (kernels/cuda/context.h):
//   f32   CUBLAS_COMPUTE_32F with default (non-tensor-op) math
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32 (TF32 tensor cores, f32 in and out)
//   bf16  A and B rounded to bf16 (nearest even) into scratch(gemm_a) and
//         scratch(gemm_b), f32 accumulation and f32 C
// so gemm_a and gemm_b must not be held by a caller across a gemm call.
#pragma once

#include "kernels/cuda/context.h"

#include <cstdint>

namespace shardtrain::cuda {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// `batch` independent GEMMs with the row-major convention above: product i
// reads A + i*stride_a and B + i*stride_b and writes C + i*stride_c (strides
// in floats). Used by attention over the heads of one sample.
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                          int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta,
                          float* C, int64_t ldc, int64_t stride_c, int64_t batch);

// One operand as a GEMM reads it: the f32 matrix itself, or (to_bf16) its
// bf16 copy packed into scratch `slot` (then ld = the stored width and
// stride = rows*cols, or 0 with a single copy when every product of a batch
// reads the same matrix). rows x cols is the stored (row-major) shape.
struct GemmOperand {
  const void* ptr;
  int64_t ld, stride;
};
GemmOperand gemm_operand(const float* X, int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch,
                         bool to_bf16, ScratchSlot slot);

// gemm() on operands that are bf16 copies already (a caller that reuses one
// copy for several GEMMs: a linear layer's input and weight, made by its
// forward and read again by its backward), whatever gemm_precision() says:
// bf16 products, f32 accumulation and C. a.ld and b.ld are the copies' row
// strides (their stored widths when packed by gemm_operand).
void gemm_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const GemmOperand& a,
                 const GemmOperand& b, float beta, float* C, int64_t ldc);

}  // namespace shardtrain::cuda
