// bf16 values as the CUDA kernels load and store them: 16-bit patterns, the
// upper half of an f32 (runtime/core/dtype.h's bf16). Rounding as
// shardtrain::to_bf16 (to nearest even; NaN stays a quiet NaN), so a value
// stored here has the CPU's bits.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

__device__ inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

__device__ inline float bf16_bits_to_f32(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

// Loads and stores that serve kernels templated on their element type.
__device__ inline float load_f32(const float* p, int64_t i) { return p[i]; }
__device__ inline float load_f32(const uint16_t* p, int64_t i) { return bf16_bits_to_f32(p[i]); }
__device__ inline void store_f32(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store_f32(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16_bits(v); }

}  // namespace shardtrain::cuda
