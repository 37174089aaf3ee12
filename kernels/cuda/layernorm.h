// LayerNorm over the last dimension C of [N, C] on the GPU (device pointers,
// compute stream), with the semantics of kernels/cpu/layernorm.h. Forward and
// din run one block per row (mean, then the variance of the centered values,
// by fixed-order tree sums); dweight and dbias are column sums over chunks of
// 32 rows added in row order, then the chunks added in order (the CPU adds
// all rows in one run), so every result is deterministic.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// Saves mean[N] and rstd[N] = 1/sqrt(var + eps) for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps);

// din is overwritten; dweight/dbias are overwritten, or added to when accumulate.
void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        bool accumulate);

}  // namespace shardtrain::cuda
