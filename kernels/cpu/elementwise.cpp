#include "kernels/cpu/elementwise.h"

#include "kernels/cpu/vec_math.h"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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

ST_VECTOR_CLONES void f32_to_bf16(bf16* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i].bits = detail::bf16_bits(in[i]);
}

// One call for the whole matrix: a product's operand is often a head's
// slice (32 or 64 columns of a wider tensor), and a call per row cost more
// than the conversion itself.
ST_VECTOR_CLONES void f32_to_bf16_rows(bf16* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c].bits = detail::bf16_bits(in[r * ld + c]);
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

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// The middle of copy_streaming, from a 64-byte aligned dst: whole lines.
__attribute__((target("avx512f"))) int64_t copy_streaming_avx512(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
  return i;
}

int64_t copy_streaming_sse2(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  return i;
}

}  // namespace

void copy_streaming(float* dst, const float* src, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  // Plain stores up to the first line boundary, streamed lines, plain stores after.
  const int64_t head = std::min<int64_t>(n, int64_t((64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63) / 4);
  if ((reinterpret_cast<uintptr_t>(dst) & 3) != 0) {  // not even float-aligned: no streaming
    std::memcpy(dst, src, size_t(n) * sizeof(float));
    return;
  }
  std::memcpy(dst, src, size_t(head) * sizeof(float));
  const int64_t body = head + (avx512 ? copy_streaming_avx512(dst + head, src + head, n - head)
                                      : copy_streaming_sse2(dst + head, src + head, n - head));
  std::memcpy(dst + body, src + body, size_t(n - body) * sizeof(float));
  _mm_sfence();
}
#else
void copy_streaming(float* dst, const float* src, int64_t n) { std::memcpy(dst, src, size_t(n) * sizeof(float)); }
#endif

}  // namespace shardtrain::cpu
