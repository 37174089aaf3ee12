// LayerNorm over the last dimension C of [N, C], with affine weight and bias.
// Forward saves mean[N] and rstd[N] = 1/sqrt(var + eps) for backward.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps);

// din is overwritten; dweight/dbias are overwritten, or added to when accumulate.
void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        bool accumulate);

}  // namespace shardtrain::cpu
