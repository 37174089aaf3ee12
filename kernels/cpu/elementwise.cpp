#include "kernels/cpu/elementwise.h"

#include "kernels/cpu/vec_math.h"

#include <bit>

namespace shardtrain::cpu {

double sum_squares(const float* x, int64_t n) {
  // Eight independent double accumulators (vectorizable), combined in a fixed
  // order: the result does not depend on anything but the data.
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += double(x[i + k]) * double(x[i + k]);
  for (; i < n; ++i) acc[0] += double(x[i]) * double(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void scale_inplace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void clip_to_norm(float* x, int64_t n, double norm, double max_norm) {
  if (max_norm > 0 && norm > max_norm) scale_inplace(x, n, float(max_norm / (norm + 1e-6)));
}

void add(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void accumulate(float* __restrict y, const float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

ST_VECTOR_CLONES float dot(const float* a, const float* b, int64_t n) {
  return detail::lane_sum(n, [&](int64_t i) { return a[i] * b[i]; });
}

namespace {

// to_bf16's rounding as integer data flow with the NaN case selected by a
// mask rather than returned early: the early return kept GCC from
// vectorizing the loops below, and every bf16 product packs its operands
// through them. Same bits as to_bf16 for every input
// (kernels_elementwise_test).
inline uint16_t rounded_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest, ties to even
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  const uint32_t nan = 0u - uint32_t((u & 0x7fffffffu) > 0x7f800000u);
  return uint16_t((quiet_nan & nan) | (rounded & ~nan));
}

}  // namespace

ST_VECTOR_CLONES void f32_to_bf16(bf16* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i].bits = rounded_to_bf16(in[i]);
}

// One call for the whole matrix: a product's operand is often a head's
// slice (32 or 64 columns of a wider tensor), and a call per row cost more
// than the conversion itself.
ST_VECTOR_CLONES void f32_to_bf16_rows(bf16* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c].bits = rounded_to_bf16(in[r * ld + c]);
}

ST_VECTOR_CLONES void bf16_to_f32(float* out, const bf16* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(uint32_t(in[i].bits) << 16);
}

void u8_to_f32_normalized(float* __restrict out, const uint8_t* __restrict in, int64_t n, float mean, float std) {
  // (x/255 - mean)/std folded into one multiply-add per element.
  const float a = 1.0f / (255.0f * std);
  const float b = -mean / std;
  for (int64_t i = 0; i < n; ++i) out[i] = float(in[i]) * a + b;
}

}  // namespace shardtrain::cpu
