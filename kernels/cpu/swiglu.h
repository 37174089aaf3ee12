// SwiGLU, the gated activation of a Llama block's MLP, on the output of one
// fused gate-and-up projection.
//
// gu holds N rows of 2F: the gate g in columns [0, F), the up projection u in
// [F, 2F). h [N, F] = silu(g) * u with silu(g) = g * sigmoid(g). sigmoid is
// evaluated as 1/(1 + e) for g >= 0 and e/(1 + e) for g < 0, e = e^{-|g|} <= 1
// (detail::exp_nonpos, vec_math.h): no overflow for any finite g, and no
// cancellation where sigmoid is tiny. Each operation rounded on its own, in
// the order the .cpp spells out (kernels/cuda/swiglu.h evaluates the same).
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// h must not overlap gu.
void swiglu_forward(float* h, const float* gu, int64_t N, int64_t F);

// dgu [N, 2F] is overwritten from dh [N, F] and the forward's gu:
// dg = dh * u * silu'(g), du = dh * silu(g). dgu must not overlap dh or gu.
void swiglu_backward(float* dgu, const float* dh, const float* gu, int64_t N, int64_t F);

}  // namespace shardtrain::cpu
