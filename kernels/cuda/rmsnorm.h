// RMSNorm over the last dimension C of [N, C] on the GPU (device pointers,
// compute stream), with the semantics of kernels/cpu/rmsnorm.h. Forward and
// din run one block per row, the row's sums by fixed-order tree sums
// (block_reduce.cuh); dweight is column sums over chunks of 32 rows added in
// row order, then the chunks added in order (the CPU adds all rows in one
// run), so every result is deterministic and within a few ulps of the CPU's.
// Every other operation is rounded on its own in the CPU's order. The fused
// residual variants run the same kernels with the add folded into a row pass,
// so they give the bits of add (kernels/cuda/elementwise.h) and the unfused
// kernels.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// Saves rstd[N] = 1/sqrt(mean(in^2) + eps) for backward.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t N, int64_t C, float eps);
// The same with out bf16 where out_bf16 (each f32 result rounded once: mixed
// precision's normalized activations, which feed a bf16 GEMM).
void rmsnorm_forward(void* out, bool out_bf16, float* rstd, const float* in, const float* weight, int64_t N, int64_t C,
                     float eps);

// sum_out = a + b, then rmsnorm_forward of sum_out into out, in one kernel.
// sum_out may be a or b itself, but must not otherwise overlap them.
void residual_rmsnorm_forward(float* sum_out, float* out, float* rstd, const float* a, const float* b,
                              const float* weight, int64_t N, int64_t C, float eps);
// out f32 or bf16 as in rmsnorm_forward; the sum is f32 (the residual stream).
void residual_rmsnorm_forward(float* sum_out, void* out, bool out_bf16, float* rstd, const float* a, const float* b,
                              const float* weight, int64_t N, int64_t C, float eps);

// din overwritten with the input gradient, + dresidual where dresidual is not
// null (added as din's elements are written; din may be dresidual itself);
// dweight overwritten, or added to when accumulate.
void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                      const float* rstd, const float* dresidual, int64_t N, int64_t C, bool accumulate);

}  // namespace shardtrain::cuda
