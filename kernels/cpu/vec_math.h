// Building blocks for the kernels' inner loops that GCC vectorizes in a
// portable build (SSE2 on x86-64, no -ffast-math). Without fast-math the
// compiler will not vectorize libm calls (expf, tanhf, sqrtf: errno), float
// reductions (it may not reorder a sum) or float max reductions, and it will
// not if-convert a select that guards arithmetic (-ftrapping-math). These
// helpers are written around those limits, and every result depends only on
// the data: no reordering between runs, and where a kernel is compiled for
// several instruction sets (ST_VECTOR_CLONES below), the same bits on each.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__SSE__)
#include <xmmintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

// ST_VECTOR_CLONES before a kernel's definition compiles it three times,
// for AVX-512, AVX2 and the portable baseline, and the loader picks the
// widest the CPU has (GCC's target_clones: an ifunc, resolved once). The
// AVX-512 clone is x86-64-v4 (F, BW, DQ, VL, CD: every AVX-512 Xeon since
// Skylake), not F alone: without BW's 16-bit lanes the bf16 conversions,
// which pack 32-bit lanes into 16-bit ones, get 256-bit vectors. Only for
// kernels whose results cannot depend on the vector width: element by element,
// or reductions written with explicit partial sums (lane_sum): the compiler
// may not reorder float arithmetic, and kernels/cpu is built with
// -ffp-contract=off (no a*b+c turned into an FMA), so every clone gives the
// same bits as the baseline (kernels_activation_test checks GELU's bit for bit).
// Not under ThreadSanitizer: the loader runs the ifunc resolver, which TSan
// instruments, before TSan has started, and the process crashes at load.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define ST_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define ST_VECTOR_CLONES
#endif

namespace shardtrain::cpu::detail {

// c ? a : b on the bit patterns. Both sides are computed anyway; written as
// integer data flow, GCC cannot turn it into a branch that moves a side's
// arithmetic under it (which is what it does with a float `?:`, and then it
// gives up vectorizing the loop).
inline float select(bool c, float a, float b) {
  const uint32_t mask = 0u - uint32_t(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) | (std::bit_cast<uint32_t>(b) & ~mask));
}

// x rounded to bf16 (to nearest, ties to even; NaN stays a quiet NaN), as
// to_bf16() rounds (runtime/core/dtype.h), written as integer data flow
// with the NaN case selected by a mask rather than returned early: the
// early return keeps GCC from vectorizing the loops that call it.
inline uint16_t bf16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  const uint32_t nan = 0u - uint32_t((u & 0x7fffffffu) > 0x7f800000u);
  return uint16_t((quiet_nan & nan) | (rounded & ~nan));
}

// e^x for x <= 0 (softmax after max subtraction, sigmoid of -|z|), within
// ~2 ulp of expf; exactly 0 below -87.3 and for -inf; NaN stays NaN.
inline float exp_nonpos(float x) {
  // x = n*ln2 + r with n = round(x/ln2): adding 1.5*2^23 rounds the fraction
  // away (round-to-nearest), and t's low mantissa bits then hold n.
  const float t = x * 1.44269504f + 12582912.0f;
  const float n = t - 12582912.0f;
  // ln2 split in two (Cody-Waite): n*hi is exact, so r keeps its low bits.
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  // e^r, |r| <= 0.35, by its Taylor series to r^7 (truncation < 1e-8 relative).
  const float p =
      1.0f +
      r * (1.0f +
           r * (1.0f / 2 + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  // 2^n from its exponent bits; unsigned arithmetic, so a huge |x| wraps
  // harmlessly (its result is masked away below).
  const uint32_t n_bits = std::bit_cast<uint32_t>(t) - 0x4B400000u;
  const float y = p * std::bit_cast<float>((n_bits + 127u) << 23);
  // Below -87.3, 2^n leaves the normal range: the answer is 0 (NaN compares
  // false and stays NaN).
  return select(x < -87.3f, 0.0f, y);
}

// s = (1 + tanh u) / 2 = sigmoid(2u) = 1/(1 + e) for u >= 0, e/(1 + e) for
// u < 0, with e = e^{-2|u|} <= 1: no overflow, and no cancellation where s is
// tiny (1 + tanh u would lose every digit). Also gives sech^2(u) = 4e/(1 + e)^2.
inline float sigmoid_2u(float u, float* sech2) {
  const float e = exp_nonpos(-2.0f * std::fabs(u));
  const float inv = 1.0f / (1.0f + e);
  *sech2 = 4.0f * e * inv * inv;
  return select(u >= 0.0f, 1.0f, e) * inv;
}

// Sum over i in [0, n) of term(i), in float, with 8 interleaved partial sums
// combined in a fixed order: vectorizable, and the same bits on every run.
template <class Term>
inline float lane_sum(int64_t n, Term&& term) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += term(i + k);
  for (int k = 0; i < n; ++i, ++k) acc[k] += term(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Largest of x[0..n), n >= 1, over 8 independent chains (the compiler will not
// vectorize a float max reduction, but it can overlap 8 of them).
inline float lane_max(const float* x, int64_t n) {
  float acc[8];
  for (int k = 0; k < 8; ++k) acc[k] = x[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
  for (; i < n; ++i) acc[0] = x[i] > acc[0] ? x[i] : acc[0];
  float m = acc[0];
  for (int k = 1; k < 8; ++k) m = acc[k] > m ? acc[k] : m;
  return m;
}

// out[i] = sqrt(in[i]) (IEEE, correctly rounded, as std::sqrt). std::sqrt must
// set errno for negative inputs, so GCC keeps it scalar unless -fno-math-errno;
// the SIMD instruction gives the same bits four at a time.
inline void sqrt_n(float* out, const float* in, int64_t n) {
  int64_t i = 0;
#if defined(__SSE__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(in + i)));
#elif defined(__ARM_NEON) && defined(__aarch64__)
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vsqrtq_f32(vld1q_f32(in + i)));
#endif
  for (; i < n; ++i) out[i] = std::sqrt(in[i]);
}

}  // namespace shardtrain::cpu::detail
