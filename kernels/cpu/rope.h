// Rotary position embeddings (RoPE), applied in place to rows of a fused
// projection (a Llama block's qkv: the query heads, then the key heads, then
// the value heads, which are not rotated).
//
// x holds B*T rows of `row` floats (the row stride); row r is at sequence
// position t = r % T. The first n_heads heads of size hs (even) of each row,
// contiguous from column 0, are rotated; columns from n_heads*hs on are left
// as they are. Pairing is rotate-half (as Hugging Face's Llama, not the
// interleaved pairs of the original paper): for i < hs/2, with
// angle = t * theta^(-2i/hs),
//   (x[i], x[i+hs/2]) <- (x[i] cos - x[i+hs/2] sin, x[i+hs/2] cos + x[i] sin).
//
// The table: theta^(-2i/hs) and t * theta^(-2i/hs) are computed in double
// (std::pow, then one product), then cos and sin in double, each rounded to
// float once; every element is then rotated in float, each product and sum
// rounded on its own (kernels/cpu is built without FMA contraction). So the
// angles carry no float error that grows with t, and the table is the same
// on every run and for every caller. kernels/cuda/rope.h builds it the same
// way (its entries can differ only through CUDA's double pow and sincos,
// rarely and by one float ulp).
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

void rope_forward(float* x, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta);

// The gradient through rope_forward, in place: the rotation is orthogonal,
// so its transpose is the inverse rotation (angle -> -angle) of dx, with the
// same table.
void rope_backward(float* dx, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta);

}  // namespace shardtrain::cpu
