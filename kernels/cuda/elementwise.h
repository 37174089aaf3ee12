// Small memory-bound helpers on the GPU (device pointers, compute stream):
// the same semantics as kernels/cpu/elementwise.h. Sums of squares reduce in
// double in a fixed order (per-block partials, then one block), so they are
// deterministic. sum_squares waits for the compute stream to return its
// value; the clipping functions keep the norm on the device and do not wait.
#pragma once

#include <cstdint>

namespace shardtrain {
struct bf16;  // runtime/core/dtype.h (C++20; the CUDA sources build as C++17)
}

namespace shardtrain::cuda {

double sum_squares(const float* x, int64_t n);
// sq[0] = float(sum of squares of x).
void sum_squares_into(float* sq, const float* x, int64_t n);
// cpu::clip_to_norm with the norm of x itself (summed in double) ...
void clip_to_max_norm(float* x, int64_t n, double max_norm);
// ... or of a squared norm sq[0] on the device (FSDP sums the shards' first).
void clip_to_squared_norm(float* x, int64_t n, const float* sq, double max_norm);
void scale_inplace(float* x, int64_t n, float s);
// out = a + b (out may alias a or b).
void add(float* out, const float* a, const float* b, int64_t n);
// y += x
void accumulate(float* y, const float* x, int64_t n);

// Round-to-nearest-even conversions, bit-identical to the CPU's.
void f32_to_bf16(bf16* out, const float* in, int64_t n);
void bf16_to_f32(float* out, const bf16* in, int64_t n);

// out = (in / 255 - mean) / std, folded into one multiply and one add as on the CPU.
void u8_to_f32_normalized(float* out, const uint8_t* in, int64_t n, float mean, float std);

}  // namespace shardtrain::cuda
