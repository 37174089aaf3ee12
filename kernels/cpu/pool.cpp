#include "kernels/cpu/pool.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <atomic>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace shardtrain::cpu {
namespace {

// A 2x2 window's largest value and its index: the compare-and-select chain
// over the four taps in scan order, with a strict, ordered '>' (the first
// maximum wins a tie; a NaN never replaces the best). i0 is the first tap's
// index, W the row's width. Branch-free selects, so that the loops around
// it vectorize.
struct WindowMax {
  float value;
  int32_t index;
};
inline WindowMax max_of_window(float v0, float v1, float v2, float v3, int32_t i0, int32_t W) {
  float best = v0;
  int32_t k = i0;
  k = v1 > best ? i0 + 1 : k;
  best = v1 > best ? v1 : best;
  k = v2 > best ? i0 + W : k;
  best = v2 > best ? v2 : best;
  k = v3 > best ? i0 + W + 1 : k;
  best = v3 > best ? v3 : best;
  return {best, k};
}

// The common 2x2 window with stride 2, one output row at a time: the chain
// vectorizes across the row, where the general loop below cannot.
void maxpool_2x2_row(float* __restrict o, int32_t* __restrict a, const float* __restrict x, int64_t oh, int64_t OW,
                     int64_t W) {
  const float* r0 = x + 2 * oh * W;
  const float* r1 = r0 + W;
  const int32_t base = int32_t(2 * oh * W);
  for (int64_t ow = 0; ow < OW; ++ow) {
    const WindowMax m =
        max_of_window(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1], base + int32_t(2 * ow), int32_t(W));
    o[ow] = m.value;
    a[ow] = m.index;
  }
}

// Backward of one 2x2/2 output row: 2x2 windows tile the plane without
// overlap, so every covered pixel is written once (its gradient or 0)
// instead of zeroing the plane and scattering.
void maxpool_2x2_backward_row(float* __restrict dx, const float* __restrict g, const int32_t* __restrict a, int64_t oh,
                              int64_t OW, int64_t W) {
  float* r0 = dx + 2 * oh * W;
  float* r1 = r0 + W;
  const int32_t base = int32_t(2 * oh * W);
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int32_t i0 = base + int32_t(2 * ow), k = a[ow];
    const float gv = g[ow];
    r0[2 * ow] = k == i0 ? gv : 0.0f;
    r0[2 * ow + 1] = k == i0 + 1 ? gv : 0.0f;
    r1[2 * ow] = k == i0 + int32_t(W) ? gv : 0.0f;
    r1[2 * ow + 1] = k == i0 + int32_t(W) + 1 ? gv : 0.0f;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The first k of 16 lanes.
__mmask16 first_lanes(int64_t k) { return __mmask16(k >= 16 ? 0xffffu : (1u << k) - 1u); }

// One tap of the chain: where v > best (ordered), v and the tap's index.
__attribute__((target("avx512f"))) inline void take(__m512 v, int32_t offset, __m512i i0, __m512& best, __m512i& idx) {
  const __mmask16 better = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
  best = _mm512_mask_mov_ps(best, better, v);
  idx = _mm512_mask_mov_epi32(idx, better, _mm512_add_epi32(i0, _mm512_set1_epi32(offset)));
}

// maxpool_2x2_row on 16 outputs at a time: the two input rows' 32 floats
// each are split into their even and odd columns (two permutes), and the
// same compare-and-select chain runs on the four taps, in the same order
// with the same ordered '>' (false on NaN), so the outputs and indices are
// the portable loop's exactly. A masked load and store take a row shorter
// than 16 outputs (the CNN's are 14 and 7), which the portable loop,
// vectorized along a row, runs mostly in its scalar tail.
__attribute__((target("avx512f"))) void maxpool_2x2_row_avx512(float* o, int32_t* a, const float* x, int64_t oh,
                                                               int64_t OW, int64_t W) {
  const float* r0 = x + 2 * oh * W;
  const float* r1 = r0 + W;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow), in_floats = 2 * n;
    const __mmask16 lo = first_lanes(in_floats), hi = first_lanes(std::max<int64_t>(0, in_floats - 16));
    const __m512 t0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ow), t1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ow + 16);
    const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ow), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ow + 16);
    // Each output's first tap: 2 * oh * W + 2 * (ow + lane), even's lanes.
    const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(int32_t(2 * oh * W + 2 * ow)), even);
    __m512 best = _mm512_permutex2var_ps(t0, even, t1);
    __m512i idx = i0;
    take(_mm512_permutex2var_ps(t0, odd, t1), 1, i0, best, idx);
    take(_mm512_permutex2var_ps(b0, even, b1), int32_t(W), i0, best, idx);
    take(_mm512_permutex2var_ps(b0, odd, b1), int32_t(W) + 1, i0, best, idx);
    const __mmask16 out = first_lanes(n);
    _mm512_mask_storeu_ps(o + ow, out, best);
    _mm512_mask_storeu_epi32(a + ow, out, idx);
  }
}

// g where the window's index k is the tap at i0 + offset, else 0.
__attribute__((target("avx512f"))) inline __m512 gradient_at(__m512i k, __m512i i0, int32_t offset, __m512 g) {
  return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_add_epi32(i0, _mm512_set1_epi32(offset))), g);
}

// maxpool_2x2_backward_row on 16 outputs at a time: each of the four taps
// gets the gradient where the window's index names it and 0 elsewhere (the
// portable loop's `k == i ? g : 0.0f`), and two permutes interleave the
// taps back into each input row's even and odd columns.
__attribute__((target("avx512f"))) void maxpool_2x2_backward_row_avx512(float* dx, const float* g, const int32_t* a,
                                                                        int64_t oh, int64_t OW, int64_t W) {
  float* r0 = dx + 2 * oh * W;
  float* r1 = r0 + W;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  // Lanes 0..15 of (x, y) interleaved: x0 y0 x1 y1 ... (lo: outputs 0-7, hi: 8-15).
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow), in_floats = 2 * n;
    const __mmask16 out = first_lanes(n), lo_mask = first_lanes(in_floats),
                    hi_mask = first_lanes(std::max<int64_t>(0, in_floats - 16));
    const __m512 gv = _mm512_maskz_loadu_ps(out, g + ow);
    const __m512i k = _mm512_maskz_loadu_epi32(out, a + ow);
    const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(int32_t(2 * oh * W + 2 * ow)), even);
    const __m512 t0 = gradient_at(k, i0, 0, gv), t1 = gradient_at(k, i0, 1, gv);
    const __m512 b0 = gradient_at(k, i0, int32_t(W), gv), b1 = gradient_at(k, i0, int32_t(W) + 1, gv);
    _mm512_mask_storeu_ps(r0 + 2 * ow, lo_mask, _mm512_permutex2var_ps(t0, lo, t1));
    _mm512_mask_storeu_ps(r0 + 2 * ow + 16, hi_mask, _mm512_permutex2var_ps(t0, hi, t1));
    _mm512_mask_storeu_ps(r1 + 2 * ow, lo_mask, _mm512_permutex2var_ps(b0, lo, b1));
    _mm512_mask_storeu_ps(r1 + 2 * ow + 16, hi_mask, _mm512_permutex2var_ps(b0, hi, b1));
  }
}
#endif

bool cpu_has_avx512() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}
std::atomic<bool> g_pool_avx512{cpu_has_avx512()};

}  // namespace

bool set_maxpool_avx512(bool on) { return g_pool_avx512.exchange(on && cpu_has_avx512()); }

void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const Pool2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW(), plane = s.H * s.W;
  if (s.K == 2 && s.stride == 2) {
    [[maybe_unused]] const bool wide = g_pool_avx512.load(std::memory_order_relaxed);
    for (int64_t p = 0; p < s.B * s.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh) {
        float* o = out + (p * OH + oh) * OW;
        int32_t* a = argmax + (p * OH + oh) * OW;
#if defined(__x86_64__) && defined(__GNUC__)
        if (wide) {
          maxpool_2x2_row_avx512(o, a, in + p * plane, oh, OW, s.W);
          continue;
        }
#endif
        maxpool_2x2_row(o, a, in + p * plane, oh, OW, s.W);
      }
    return;
  }
  for (int64_t p = 0; p < s.B * s.C; ++p) {
    const float* x = in + p * plane;
    float* o = out + p * OH * OW;
    int32_t* a = argmax + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        // Scan the window row by row; strict '>' keeps the first maximum, and
        // the selects compile to branch-free code.
        int64_t best = oh * s.stride * s.W + ow * s.stride;
        float best_value = x[best];
        for (int64_t ki = 0; ki < s.K; ++ki)
          for (int64_t kj = 0; kj < s.K; ++kj) {
            const int64_t idx = (oh * s.stride + ki) * s.W + ow * s.stride + kj;
            const bool better = x[idx] > best_value;
            best_value = better ? x[idx] : best_value;
            best = better ? idx : best;
          }
        o[oh * OW + ow] = best_value;
        a[oh * OW + ow] = int32_t(best);
      }
  }
}

namespace {

// Output row oh of one 16-channel block at p0 (its pixel (0, 0)): window
// ow's four taps lie `pixel` and W * pixel floats apart from its pixel
// (2 oh, 2 ow); the chain is maxpool_2x2_row's, one lane per channel. vals
// and idx are [OW][16]. With `relu`, ReLU's test on the result (NaN and -0
// become 0) and index -1 where it zeroed it.
ST_VECTOR_CLONES void maxpool_2x2_channel_row(float* __restrict vals, int32_t* __restrict idx,
                                              const float* __restrict p0, int64_t oh, int64_t OW, int64_t W,
                                              int64_t pixel, bool relu) {
  const int32_t base = int32_t(2 * oh * W);
  const float* row = p0 + 2 * oh * W * pixel;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const float* t0 = row + 2 * ow * pixel;
    const float* t1 = t0 + pixel;
    const float* t2 = t0 + W * pixel;
    const float* t3 = t2 + pixel;
    const int32_t i0 = base + int32_t(2 * ow);
    for (int64_t l = 0; l < 16; ++l) {
      const WindowMax m = max_of_window(t0[l], t1[l], t2[l], t3[l], i0, int32_t(W));
      const bool kept = !relu || m.value > 0.0f;
      vals[ow * 16 + l] = kept ? m.value : 0.0f;
      idx[ow * 16 + l] = kept ? m.index : -1;
    }
  }
}

// The [n][16] block at `in` (n <= 16) to 16 rows of n at out, out + ld, ...
template <typename T>
void transpose_to_rows(T* out, int64_t ld, const T* in, int64_t n) {
  for (int64_t l = 0; l < 16; ++l)
    for (int64_t i = 0; i < n; ++i) out[l * ld + i] = in[i * 16 + l];
}

#if defined(__x86_64__) && defined(__GNUC__)
// 128-bit lanes of two vectors: kEven takes lanes 0 and 2 of each, kOdd
// lanes 1 and 3 (x's two first).
constexpr int kEven = 0x88, kOdd = 0xdd;
template <int kImm>
__attribute__((target("avx512f"))) inline __m512 lanes(__m512 x, __m512 y) {
  return _mm512_maskz_shuffle_f32x4(0xffff, x, y, kImm);
}

// transpose_to_rows of 32-bit values (floats or indices: only moved, never
// computed on) in registers: the 16 x 16 transpose of three rounds of
// shuffles (32-bit pairs, 64-bit pairs, 128-bit lanes), rows past n read as
// 0 and columns past n not stored.
__attribute__((target("avx512f"))) void transpose_to_rows_avx512(void* out_rows, int64_t ld, const void* in_rows,
                                                                 int64_t n) {
  const auto* in = static_cast<const char*>(in_rows);
  __m512 r[16], t[16], u[16];
  for (int64_t i = 0; i < 16; ++i) r[i] = i < n ? _mm512_loadu_ps(in + i * 64) : _mm512_setzero_ps();
  for (int i = 0; i < 16; i += 2) {
    // The zero-masked forms with every lane kept: the plain ones pass GCC
    // 12 an undefined source that -Wuninitialized flags.
    t[i] = _mm512_maskz_unpacklo_ps(0xffff, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(0xffff, r[i], r[i + 1]);
  }
  // u[4q + j]: in each 128-bit lane k, rows 4q..4q+3 of column 4k + j.
  for (int q = 0; q < 16; q += 4) {
    const __m512d a0 = _mm512_castps_pd(t[q]), a1 = _mm512_castps_pd(t[q + 1]);
    const __m512d a2 = _mm512_castps_pd(t[q + 2]), a3 = _mm512_castps_pd(t[q + 3]);
    u[q] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, a0, a2));
    u[q + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, a0, a2));
    u[q + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, a1, a3));
    u[q + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, a1, a3));
  }
  const __mmask16 keep = __mmask16(n >= 16 ? 0xffffu : (1u << n) - 1u);
  for (int j = 0; j < 4; ++j) {
    const __m512 even_a = lanes<kEven>(u[j], u[4 + j]), even_b = lanes<kEven>(u[8 + j], u[12 + j]);
    const __m512 odd_a = lanes<kOdd>(u[j], u[4 + j]), odd_b = lanes<kOdd>(u[8 + j], u[12 + j]);
    char* o = static_cast<char*>(out_rows);
    const int64_t row = 4 * ld;  // bytes
    _mm512_mask_storeu_ps(o + j * row, keep, lanes<kEven>(even_a, even_b));
    _mm512_mask_storeu_ps(o + (8 + j) * row, keep, lanes<kOdd>(even_a, even_b));
    _mm512_mask_storeu_ps(o + (4 + j) * row, keep, lanes<kEven>(odd_a, odd_b));
    _mm512_mask_storeu_ps(o + (12 + j) * row, keep, lanes<kOdd>(odd_a, odd_b));
  }
}
#endif

// The [OW][16] results of one row to the 16 channels' NCHW rows (stride ld),
// 16 outputs at a time.
template <typename T>
void channel_row_to_rows(T* out, int64_t ld, const T* in, int64_t OW) {
  static_assert(sizeof(T) == 4);
  [[maybe_unused]] const bool wide = g_pool_avx512.load(std::memory_order_relaxed);
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow);
#if defined(__x86_64__) && defined(__GNUC__)
    if (wide) {
      transpose_to_rows_avx512(out + ow, ld, in + ow * 16, n);
      continue;
    }
#endif
    transpose_to_rows(out + ow, ld, in + ow * 16, n);
  }
}

}  // namespace

void maxpool_2x2_from_channel_blocks(float* out, int32_t* argmax, const float* in, const Pool2dShape& s,
                                     const ChannelBlocks16& layout, bool relu) {
  ST_CHECK(s.K == 2 && s.stride == 2 && s.H % 2 == 0 && s.W % 2 == 0 && s.C % 16 == 0,
           "maxpool_2x2_from_channel_blocks: a 2x2/2 window over even planes of 16-channel blocks, got window {} "
           "stride {} over {}x{}, {} channels",
           s.K, s.stride, s.H, s.W, s.C);
  const int64_t OH = s.OH(), OW = s.OW();
  thread_local std::vector<float> vals;
  thread_local std::vector<int32_t> idx;
  vals.resize(size_t(OW * 16));
  idx.resize(size_t(OW * 16));
  for (int64_t n = 0; n < s.B; ++n)
    for (int64_t cb = 0; cb < s.C / 16; ++cb)
      for (int64_t oh = 0; oh < OH; ++oh) {
        maxpool_2x2_channel_row(vals.data(), idx.data(), in + n * layout.sample + cb * layout.block, oh, OW, s.W,
                                layout.pixel, relu);
        // The row's 16 x OW results to their 16 NCHW rows.
        const int64_t row = ((n * s.C + cb * 16) * OH + oh) * OW;
        channel_row_to_rows(out + row, OH * OW, vals.data(), OW);
        channel_row_to_rows(argmax + row, OH * OW, idx.data(), OW);
      }
}

namespace {

// The 2x2/2 backward of `planes` whole channel planes.
void maxpool_2x2_backward_planes(float* din, const float* dout, const int32_t* argmax, int64_t planes,
                                 const Pool2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW(), plane = s.H * s.W;
  [[maybe_unused]] const bool wide = g_pool_avx512.load(std::memory_order_relaxed);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* g = dout + (p * OH + oh) * OW;
      const int32_t* a = argmax + (p * OH + oh) * OW;
#if defined(__x86_64__) && defined(__GNUC__)
      if (wide) {
        maxpool_2x2_backward_row_avx512(din + p * plane, g, a, oh, OW, s.W);
        continue;
      }
#endif
      maxpool_2x2_backward_row(din + p * plane, g, a, oh, OW, s.W);
    }
}

// A 2x2/2 backward that writes more than this goes through a small staging
// buffer (kPoolStageFloats, in L1) and copy_streaming: a gradient several
// times the core's L2 reaches memory before the convolution's backward reads
// it, and streaming saves reading each of its lines before writing it.
constexpr int64_t kPoolStreamBytes = int64_t(8) << 20;
constexpr int64_t kPoolStageFloats = 8192;

}  // namespace

void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax, const Pool2dShape& s) {
  // Only the arg-max of each window gets gradient; overlapping windows
  // (stride < K) may pick the same pixel, hence zero then add.
  const int64_t OH = s.OH(), OW = s.OW(), outputs = OH * OW, plane = s.H * s.W, planes = s.B * s.C;
  if (s.K == 2 && s.stride == 2) {
    // Only an odd last row or column lies outside every window.
    if (s.H % 2 != 0 || s.W % 2 != 0) {
      std::fill(din, din + planes * plane, 0.0f);
      return maxpool_2x2_backward_planes(din, dout, argmax, planes, s);
    }
    if (planes * plane * int64_t(sizeof(float)) < kPoolStreamBytes || plane > kPoolStageFloats)
      return maxpool_2x2_backward_planes(din, dout, argmax, planes, s);
    thread_local std::vector<float> stage(kPoolStageFloats);
    const int64_t each = kPoolStageFloats / plane;  // planes per staging
    for (int64_t p = 0; p < planes; p += each) {
      const int64_t count = std::min(each, planes - p);
      maxpool_2x2_backward_planes(stage.data(), dout + p * outputs, argmax + p * outputs, count, s);
      copy_streaming(din + p * plane, stage.data(), count * plane);
    }
    return;
  }
  std::fill(din, din + s.B * s.C * plane, 0.0f);
  for (int64_t p = 0; p < s.B * s.C; ++p) {
    float* dx = din + p * plane;
    const float* g = dout + p * outputs;
    const int32_t* a = argmax + p * outputs;
    for (int64_t i = 0; i < outputs; ++i) dx[a[i]] += g[i];
  }
}

}  // namespace shardtrain::cpu
