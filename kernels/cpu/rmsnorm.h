// RMSNorm over the last dimension C of [N, C] (Llama's norm: no centering,
// no bias): out = in * rstd * weight, rstd = 1 / sqrt(mean(in^2) + eps).
//
// The mean of squares is summed in float with lane_sum (vec_math.h): eight
// interleaved partial sums over the row, x[i] * x[i] each, combined as
// ((0+1)+(2+3))+((4+5)+(6+7)), then multiplied by 1/C, as layernorm does its
// sums. The order depends on C alone, so every run gives the same bits
// (activation checkpointing recomputes forward and relies on it).
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// Saves rstd[N] for backward.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t N, int64_t C, float eps);

// A residual connection feeding an RMSNorm (a Llama block's x + branch, then
// norm), one row at a time while the row is in cache: sum_out = a + b, then
// rmsnorm_forward of sum_out into out. The bits of add(sum_out, a, b) followed
// by rmsnorm_forward. sum_out may be a or b itself, but must not otherwise
// overlap them; out overlaps none of the others.
void residual_rmsnorm_forward(float* sum_out, float* out, float* rstd, const float* a, const float* b,
                              const float* weight, int64_t N, int64_t C, float eps);

// din is overwritten with the input gradient, plus dresidual where dresidual
// is not null (the bits of the backward without it followed by
// add(din, din, dresidual)); din may be dresidual itself, but must not
// otherwise overlap it. dweight is overwritten, or added to when accumulate,
// with the rows added in row order. `in` and rstd are the forward's.
void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                      const float* rstd, const float* dresidual, int64_t N, int64_t C, bool accumulate);

}  // namespace shardtrain::cpu
