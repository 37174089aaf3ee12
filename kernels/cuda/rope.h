// Rotary position embeddings on the GPU (device pointers, compute stream),
// with the semantics of kernels/cpu/rope.h: in place on B*T rows of `row`
// elements (row r at position r % T), the first n_heads heads of size hs
// (even) rotated with rotate-half pairing, the columns past them untouched.
//
// Each call first builds the [T, hs/2] cos/sin table as the CPU does:
// t * theta^(-2i/hs) in double, cos and sin in double, each rounded to float
// once (CUDA's double pow and sincos are within 2 ulp of double, so a float
// entry can differ from the CPU's only where the exact value lies within that
// of a float rounding boundary); then rotates each pair with every product
// and sum rounded on its own in the CPU's order. The table lives in the
// context's reduce scratch slot for the call.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

void rope_forward(float* x, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta);
// x f32, or bf16 where x_bf16 (mixed precision's fused projection): each
// element widened, rotated in f32 and rounded once.
void rope_forward(void* x, bool x_bf16, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta);

// The gradient through it, in place: the inverse rotation (the transpose).
void rope_backward(float* dx, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta);
void rope_backward(void* dx, bool dx_bf16, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta);

}  // namespace shardtrain::cuda
