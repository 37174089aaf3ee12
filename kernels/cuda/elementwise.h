// Small memory-bound helpers on the GPU (device pointers, compute stream):
// the same semantics as kernels/cpu/elementwise.h. sum_squares reduces in
// double in a fixed order (per-block partials, then one block), so it is
// deterministic; it waits for the compute stream to return its value.
#pragma once

#include <cstdint>

namespace shardtrain {
struct bf16;  // runtime/core/dtype.h (C++20; the CUDA sources build as C++17)
}

namespace shardtrain::cuda {

double sum_squares(const float* x, int64_t n);
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
