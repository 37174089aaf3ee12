// Element types: f32 for compute and master weights, bf16 for storage and
// communication (mixed precision), i32 for indices (labels, token ids, arg-max). bf16 conversion rounds to nearest
// even, like PyTorch and cuBLAS, and keeps NaN a NaN.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shardtrain {

enum class DType : uint8_t { f32, bf16, i32 };

constexpr size_t dtype_size(DType t) { return t == DType::bf16 ? 2 : 4; }
constexpr std::string_view dtype_name(DType t) { return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "i32"; }

// Raw bfloat16 storage: the upper 16 bits of an IEEE-754 float.
struct bf16 {
  uint16_t bits;
};

inline bf16 to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                               // round to nearest, ties to even
  return bf16{uint16_t(u >> 16)};
}

inline float to_f32(bf16 h) { return std::bit_cast<float>(uint32_t(h.bits) << 16); }

}  // namespace shardtrain
