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

// A residual connection feeding a LayerNorm (a transformer's x + branch, then
// ln), one row at a time while the row is in cache: sum_out = a + b, then
// layernorm_forward of sum_out into out. The bits of add(sum_out, a, b)
// followed by layernorm_forward. sum_out may be a or b itself, but must not
// otherwise overlap them; out overlaps none of the others.
void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* weight, const float* bias, int64_t N, int64_t C, float eps);

// layernorm_backward with a residual's gradient added to its input gradient:
// din = dLayerNorm/din + dresidual, the bits of layernorm_backward followed by
// add(din, din, dresidual). din may be dresidual itself, but must not otherwise
// overlap it; dweight/dbias as in layernorm_backward.
void layernorm_backward_add(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                            const float* weight, const float* mean, const float* rstd, const float* dresidual,
                            int64_t N, int64_t C, bool accumulate);

}  // namespace shardtrain::cpu
