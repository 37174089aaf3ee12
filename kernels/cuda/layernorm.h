// LayerNorm over the last dimension C of [N, C] on the GPU (device pointers,
// compute stream), with the semantics of kernels/cpu/layernorm.h. Forward and
// din run one block per row (mean, then the variance of the centered values,
// by fixed-order tree sums); dweight and dbias are column sums over chunks of
// 32 rows added in row order, then the chunks added in order (the CPU adds
// all rows in one run), so every result is deterministic. The fused residual
// variants run the same kernels with the add folded into a row pass, so they
// give the bits of add (kernels/cuda/elementwise.h) and the unfused kernels.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// Saves mean[N] and rstd[N] = 1/sqrt(var + eps) for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps);
// The same with out bf16 where out_bf16 (each f32 result rounded: mixed
// precision's normalized activations, which feed a bf16 GEMM).
void layernorm_forward(void* out, bool out_bf16, float* mean, float* rstd, const float* in, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps);

// din is overwritten; dweight/dbias are overwritten, or added to when accumulate.
void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        bool accumulate);

// sum_out = a + b, then layernorm_forward of sum_out into out, in one kernel:
// the add is the first pass over each row (kernels/cpu/layernorm.h). sum_out
// may be a or b itself, but must not otherwise overlap them.
void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* weight, const float* bias, int64_t N, int64_t C, float eps);
// out f32 or bf16 as in layernorm_forward; the sum is f32 (the residual stream).
void residual_layernorm_forward(float* sum_out, void* out, bool out_bf16, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int64_t N, int64_t C,
                                float eps);

// layernorm_backward with din = its input gradient + dresidual, added as din's
// elements are written (din may be dresidual itself).
void layernorm_backward_add(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                            const float* weight, const float* mean, const float* rstd, const float* dresidual,
                            int64_t N, int64_t C, bool accumulate);

}  // namespace shardtrain::cuda
