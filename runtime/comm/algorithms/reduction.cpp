#include "runtime/comm/algorithms/reduction.h"

#include "runtime/core/error.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace shardtrain::comm {
namespace {

// to_bf16 of runtime/core/dtype.h without the branch, so that the loops below
// vectorize: round to nearest even, NaN stays a (quiet) NaN.
inline uint16_t round_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float widen_bf16(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

void sum_f32(float* dst, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

void sum_scale_f32(float* dst, const float* a, const float* b, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) dst[i] = (a[i] + b[i]) * s;
}

void sum_bf16(uint16_t* dst, const uint16_t* a, const uint16_t* b, int64_t n, float s) {
  // The unscaled case multiplies by exactly 1, which changes no bits.
  for (int64_t i = 0; i < n; ++i) dst[i] = round_bf16((widen_bf16(a[i]) + widen_bf16(b[i])) * s);
}

}  // namespace

void reduce_sum(DType dtype, void* dst, const void* a, const void* b, int64_t n, float scale) {
  switch (dtype) {
    case DType::f32:
      if (scale == 1.0f)
        sum_f32(static_cast<float*>(dst), static_cast<const float*>(a), static_cast<const float*>(b), n);
      else
        sum_scale_f32(static_cast<float*>(dst), static_cast<const float*>(a), static_cast<const float*>(b), n, scale);
      return;
    case DType::bf16:
      sum_bf16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, scale);
      return;
    case DType::i32: break;
  }
  throw Error("reductions take f32 or bf16 tensors, not i32");
}

void reduce_sum_ordered(DType dtype, void* dst, const void* const* srcs, int n, int64_t count, float scale) {
  ST_ASSERT(n >= 1);
  const int64_t elem = int64_t(dtype_size(dtype));
  auto at = [elem](const void* p, int64_t i) { return static_cast<const std::byte*>(p) + i * elem; };
  if (n == 1) {
    if (dst != srcs[0] && count > 0) std::memmove(dst, srcs[0], size_t(count * elem));
    scale_inplace(dtype, dst, count, scale);
    return;
  }
  if (n == 2) {
    reduce_sum(dtype, dst, srcs[0], srcs[1], count, scale);
    return;
  }
  // The partial sums of a block stay in a stack buffer (in L1) until the last
  // hop writes dst: dst may be one of the sources, read by a later hop.
  constexpr int64_t kBlockBytes = 4096;
  alignas(64) std::byte partial[kBlockBytes];
  const int64_t block = kBlockBytes / elem;
  auto* out = static_cast<std::byte*>(dst);
  for (int64_t i = 0; i < count; i += block) {
    const int64_t m = std::min(block, count - i);
    reduce_sum(dtype, partial, at(srcs[0], i), at(srcs[1], i), m, 1.0f);
    for (int k = 2; k < n - 1; ++k) reduce_sum(dtype, partial, partial, at(srcs[k], i), m, 1.0f);
    reduce_sum(dtype, out + i * elem, partial, at(srcs[n - 1], i), m, scale);
  }
}

void scale_inplace(DType dtype, void* x, int64_t n, float scale) {
  if (scale == 1.0f) return;
  switch (dtype) {
    case DType::f32: {
      auto* p = static_cast<float*>(x);
      for (int64_t i = 0; i < n; ++i) p[i] *= scale;
      return;
    }
    case DType::bf16: {
      auto* p = static_cast<uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) p[i] = round_bf16(widen_bf16(p[i]) * scale);
      return;
    }
    case DType::i32: break;
  }
  throw Error("reductions take f32 or bf16 tensors, not i32");
}

}  // namespace shardtrain::comm
