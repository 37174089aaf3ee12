// Row-major matrix products through oneDNN's matmul primitive, with gemm()'s
// contract (gemm.h): C[M,N] = alpha * op(A) * op(B) + beta * C, strides as
// stored, f32 accumulation. alpha is the primitive's output scale and beta a
// sum post-op. Primitives are built once per shape, strides and scalars, and
// kept for the thread (a training thread meets a handful of shapes).
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::cpu {

// `bias` (may be null): [N] added to every row of the product, in the
// primitive's epilogue (then alpha 1 and beta 0).
void onednn_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias = nullptr);
// bf16 operands (A and B as stored, strides in elements), an f32 result;
// `bias` as onednn_gemm's.
void onednn_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A,
                      int64_t lda, const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc,
                      const float* bias = nullptr);
// `count` products in one primitive: the i-th reads A + i * stride_a and
// B + i * stride_b and writes C + i * stride_c (strides in elements; f32, or
// bf16 operands where bf16_operands). oneDNN's fast (brgemm) kernels take a
// batch whose operands are each dense, stride = rows * ld; other strides
// run on its slower general kernel.
void onednn_gemm_batched(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                         float beta, float* C, int64_t ldc, int64_t stride_c, bool bf16_operands);

}  // namespace shardtrain::cpu
