// Small memory-bound helpers used around the layers.
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::cpu {

// Sum of squares, accumulated in double in a fixed order (deterministic).
double sum_squares(const float* x, int64_t n);
void scale_inplace(float* x, int64_t n, float s);
// Global-norm clipping (torch.nn.utils.clip_grad_norm_): x *= max_norm /
// (norm + 1e-6), that factor rounded to float, when norm > max_norm > 0. The
// CUDA kernels compute the same factor on the device.
void clip_to_norm(float* x, int64_t n, double norm, double max_norm);
// out = a + b (out may alias a or b): residual connections.
void add(float* out, const float* a, const float* b, int64_t n);
// y += x
void accumulate(float* y, const float* x, int64_t n);
// sum a[i] b[i] in float, in 8 partial sums (detail::lane_sum): the same bits
// on every vector width. The attention backward's row term dO . O.
float dot(const float* a, const float* b, int64_t n);

// Round-to-nearest-even conversions (bf16 storage and communication).
void f32_to_bf16(bf16* out, const float* in, int64_t n);
// The rows x cols matrix at `in` (row stride ld) packed densely into `out`.
void f32_to_bf16_rows(bf16* out, const float* in, int64_t rows, int64_t cols, int64_t ld);
void bf16_to_f32(float* out, const bf16* in, int64_t n);

// dst[0, n) = src[0, n) with stores that bypass the caches (non-temporal),
// then a store fence: for a large result written whole, which would leave
// the caches before its reader comes anyway. Each of its lines is then
// written without first being read (a plain store reads the line it
// writes). The same bits as memcpy; plain copies where the CPU has no such
// stores.
void copy_streaming(float* dst, const float* src, int64_t n);

// Pixels to network input: out = (in / 255 - mean) / std.
void u8_to_f32_normalized(float* out, const uint8_t* in, int64_t n, float mean, float std);

}  // namespace shardtrain::cpu
