#include "kernels/cpu/conv2d.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/vec_math.h"

#include <algorithm>
#include <atomic>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace shardtrain::cpu {
namespace {

// The outputs o in [lo, hi) whose input index i = o*stride - pad + k lies in
// [0, size): computed once per kernel tap (rows and columns alike), so the
// copy loops below carry no per-pixel bounds test.
struct ValidRange {
  int64_t lo, hi;
};
ValidRange valid_range(int64_t size, int64_t outputs, int64_t k, const Conv2dShape& s) {
  const int64_t first = s.pad - k;            // lowest o*stride that lands inside
  const int64_t last = size - 1 + s.pad - k;  // highest
  if (last < 0) return {0, 0};
  const int64_t lo = first <= 0 ? 0 : (first + s.stride - 1) / s.stride;
  const int64_t hi = std::min(outputs, last / s.stride + 1);
  return {std::min(lo, hi), hi};
}

// A 1x1 kernel with stride 1 and no padding has col == image: skip the copy.
bool col_is_image(const Conv2dShape& s) { return s.K == 1 && s.stride == 1 && s.pad == 0; }

}  // namespace

namespace {

// Stride 1: the image copied once into a zero-padded buffer [C, H+2p, W+2p],
// after which every col row is one contiguous copy from it with no bounds
// test and no fill (each block used to be zeroed whole first, then most of
// it overwritten row by row). The rows are short (14 floats in the CNN's
// second layer), so a row is one masked vector load and store where the CPU
// has AVX-512 or AVX2 (one sample of that layer: im2col 67 -> 29 us, col2im
// 73 -> 35 us; docs/BENCHMARKS.md). Bit for bit what the general path
// computes; col2im adds in the same order, each add the same IEEE single add.
thread_local std::vector<float> t_padded;

float* padded_buffer(const Conv2dShape& s) {
  const size_t n = size_t(s.C * (s.H + 2 * s.pad) * (s.W + 2 * s.pad));
  if (t_padded.size() < n) t_padded.resize(n);
  return t_padded.data();
}

// rows x n floats: dst rows dst_ld apart, src rows src_ld apart; copy
// (dst = src) or add (dst += src).
struct Rows {
  float* dst;
  const float* src;
  int64_t rows, n, dst_ld, src_ld;
};

template <bool kAdd>
void rows_portable(const Rows& r) {
  for (int64_t i = 0; i < r.rows; ++i) {
    float* __restrict d = r.dst + i * r.dst_ld;
    const float* __restrict f = r.src + i * r.src_ld;
    for (int64_t j = 0; j < r.n; ++j) d[j] = kAdd ? d[j] + f[j] : f[j];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
template <bool kAdd>
__attribute__((target("avx512f"))) void rows_avx512(const Rows& r) {
  const int64_t full = r.n / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (r.n - full)) - 1u);
  for (int64_t i = 0; i < r.rows; ++i) {
    float* d = r.dst + i * r.dst_ld;
    const float* f = r.src + i * r.src_ld;
    for (int64_t j = 0; j < full; j += 16) {
      __m512 v = _mm512_loadu_ps(f + j);
      if (kAdd) v = _mm512_add_ps(_mm512_loadu_ps(d + j), v);
      _mm512_storeu_ps(d + j, v);
    }
    if (tail) {
      __m512 v = _mm512_maskz_loadu_ps(tail, f + full);
      if (kAdd) v = _mm512_add_ps(_mm512_maskz_loadu_ps(tail, d + full), v);
      _mm512_mask_storeu_ps(d + full, tail, v);
    }
  }
}

template <bool kAdd>
__attribute__((target("avx2"))) void rows_avx2(const Rows& r) {
  const int64_t full = r.n / 8 * 8, rest = r.n - full;
  alignas(32) int32_t lanes[8];
  for (int k = 0; k < 8; ++k) lanes[k] = k < rest ? -1 : 0;
  const __m256i tail = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  for (int64_t i = 0; i < r.rows; ++i) {
    float* d = r.dst + i * r.dst_ld;
    const float* f = r.src + i * r.src_ld;
    for (int64_t j = 0; j < full; j += 8) {
      __m256 v = _mm256_loadu_ps(f + j);
      if (kAdd) v = _mm256_add_ps(_mm256_loadu_ps(d + j), v);
      _mm256_storeu_ps(d + j, v);
    }
    if (rest) {
      __m256 v = _mm256_maskload_ps(f + full, tail);
      if (kAdd) v = _mm256_add_ps(_mm256_maskload_ps(d + full, tail), v);
      _mm256_maskstore_ps(d + full, tail, v);
    }
  }
}
#endif

// 2: AVX-512, 1: AVX2, 0: portable; the widest the CPU has unless a test
// asks for a narrower one (set_conv_row_isa).
int widest_row_isa() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#else
  return 0;
#endif
}
std::atomic<int> g_row_isa{widest_row_isa()};

template <bool kAdd>
void rows(const Rows& r) {
#if defined(__x86_64__) && defined(__GNUC__)
  const int isa = g_row_isa.load(std::memory_order_relaxed);
  if (isa == 2) return rows_avx512<kAdd>(r);
  if (isa == 1) return rows_avx2<kAdd>(r);
#endif
  rows_portable<kAdd>(r);
}

void im2col_stride1(float* col, const float* image, const Conv2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW(), Hp = s.H + 2 * s.pad, Wp = s.W + 2 * s.pad;
  float* padded = padded_buffer(s);
  std::fill(padded, padded + s.C * Hp * Wp, 0.0f);
  for (int64_t c = 0; c < s.C; ++c)
    rows<false>({padded + (c * Hp + s.pad) * Wp + s.pad, image + c * s.H * s.W, s.H, s.W, Wp, s.W});
  // Block (c, ki, kj) of col, [OH, OW]: rows of the padded image from row ki, column kj.
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t ki = 0; ki < s.K; ++ki)
      for (int64_t kj = 0; kj < s.K; ++kj)
        rows<false>({col + ((c * s.K + ki) * s.K + kj) * OH * OW, padded + (c * Hp + ki) * Wp + kj, OH, OW, OW, Wp});
}

void col2im_stride1(float* image, const float* col, const Conv2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW(), Hp = s.H + 2 * s.pad, Wp = s.W + 2 * s.pad;
  float* padded = padded_buffer(s);
  std::fill(padded, padded + s.C * Hp * Wp, 0.0f);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t ki = 0; ki < s.K; ++ki)
      for (int64_t kj = 0; kj < s.K; ++kj)
        rows<true>({padded + (c * Hp + ki) * Wp + kj, col + ((c * s.K + ki) * s.K + kj) * OH * OW, OH, OW, Wp, OW});
  for (int64_t c = 0; c < s.C; ++c)
    rows<false>({image + c * s.H * s.W, padded + (c * Hp + s.pad) * Wp + s.pad, s.H, s.W, s.W, Wp});
}

}  // namespace

int set_conv_row_isa(int isa) { return g_row_isa.exchange(std::clamp(isa, 0, widest_row_isa())); }

void im2col(float* col, const float* image, const Conv2dShape& s) {
  if (s.stride == 1) return im2col_stride1(col, image, s);
  const int64_t OH = s.OH(), OW = s.OW();
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t ki = 0; ki < s.K; ++ki) {
      const ValidRange rows = valid_range(s.H, OH, ki, s);
      for (int64_t kj = 0; kj < s.K; ++kj) {
        // Block (c, ki, kj) of col, [OH, OW]: the pixel each output sees through this tap.
        float* block = col + ((c * s.K + ki) * s.K + kj) * OH * OW;
        const ValidRange cols = valid_range(s.W, OW, kj, s);
        // Taps that reach into the padding: zero the block with one call,
        // then fill the valid part (cheaper than many tiny fills per row).
        if (rows.lo > 0 || rows.hi < OH || cols.lo > 0 || cols.hi < OW) std::fill(block, block + OH * OW, 0.0f);
        const int64_t shift = kj - s.pad;  // iw = ow*stride + shift
        for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
          const float* src = image + (c * s.H + oh * s.stride - s.pad + ki) * s.W;
          float* dst = block + oh * OW;
          if (s.stride == 1)  // contiguous: a copy the compiler vectorizes
            for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dst[ow] = src[ow + shift];
          else
            for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dst[ow] = src[ow * s.stride + shift];
        }
      }
    }
}

void col2im(float* image, const float* col, const Conv2dShape& s) {
  // The adjoint of im2col: every col entry is added back onto the pixel it
  // was copied from (overlapping windows sum), padding entries are dropped.
  if (s.stride == 1) return col2im_stride1(image, col, s);
  const int64_t OH = s.OH(), OW = s.OW();
  std::fill(image, image + s.C * s.H * s.W, 0.0f);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t ki = 0; ki < s.K; ++ki) {
      const ValidRange rows = valid_range(s.H, OH, ki, s);
      for (int64_t kj = 0; kj < s.K; ++kj) {
        const float* block = col + ((c * s.K + ki) * s.K + kj) * OH * OW;
        const ValidRange cols = valid_range(s.W, OW, kj, s);
        const int64_t shift = kj - s.pad;
        for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
          float* dst = image + (c * s.H + oh * s.stride - s.pad + ki) * s.W;
          const float* src = block + oh * OW;
          if (s.stride == 1)
            for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dst[ow + shift] += src[ow];
          else
            for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dst[ow * s.stride + shift] += src[ow];
        }
      }
    }
}

void conv2d_forward(float* out, const float* in, const float* weight, const float* bias, float* col,
                    const Conv2dShape& s) {
  if (onednn_conv_route(s).forward) return onednn_conv_forward(out, in, weight, bias, s);
  const Im2colProducts on_openblas;
  const int64_t P = s.OH() * s.OW(), CKK = s.C * s.K * s.K;
  for (int64_t b = 0; b < s.B; ++b) {
    const float* image = in + b * s.C * s.H * s.W;
    float* o = out + b * s.OC * P;
    const float* cols = image;
    if (!col_is_image(s)) {
      im2col(col, image, s);
      cols = col;
    }
    // Bias fused as in linear: rows start at bias[oc], the GEMM adds on top.
    if (bias != nullptr)
      for (int64_t oc = 0; oc < s.OC; ++oc) std::fill(o + oc * P, o + (oc + 1) * P, bias[oc]);
    // out_b[OC, P] = W[OC, CKK] * col[CKK, P]
    gemm(false, false, s.OC, P, CKK, 1.0f, weight, CKK, cols, P, bias != nullptr ? 1.0f : 0.0f, o, P);
  }
}

void conv2d_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     float* col, const Conv2dShape& s, bool accumulate) {
  if (onednn_conv_route(s).backward) return onednn_conv_backward(din, dweight, dbias, dout, in, weight, s, accumulate);
  const Im2colProducts on_openblas;
  const int64_t P = s.OH() * s.OW(), CKK = s.C * s.K * s.K, image_size = s.C * s.H * s.W;
  if (s.B == 0 && !accumulate) {  // no samples: the sums are empty
    std::fill(dweight, dweight + s.OC * CKK, 0.0f);
    if (dbias != nullptr) std::fill(dbias, dbias + s.OC, 0.0f);
  }
  for (int64_t b = 0; b < s.B; ++b) {
    const float* image = in + b * image_size;
    const float* g = dout + b * s.OC * P;
    // The first sample overwrites (beta 0) unless accumulating: no zeroing pass.
    const bool overwrite = b == 0 && !accumulate;
    const float* cols = image;
    if (!col_is_image(s)) {
      im2col(col, image, s);
      cols = col;
    }
    // dW[OC, CKK] (+)= dout_b[OC, P] * col[CKK, P]^T
    gemm(false, true, s.OC, CKK, P, 1.0f, g, P, cols, P, overwrite ? 0.0f : 1.0f, dweight, CKK);
    if (dbias != nullptr)
      for (int64_t oc = 0; oc < s.OC; ++oc) {
        const float* go = g + oc * P;
        const float sum = detail::lane_sum(P, [&](int64_t i) { return go[i]; });
        dbias[oc] = overwrite ? sum : dbias[oc] + sum;
      }
    if (din == nullptr) continue;
    // dcol[CKK, P] = W^T * dout_b, then scattered back onto the image. col is
    // free again (the dW GEMM above was its last reader), so it holds dcol.
    float* dimage = din + b * image_size;
    if (col_is_image(s)) {
      gemm(true, false, CKK, P, s.OC, 1.0f, weight, CKK, g, P, 0.0f, dimage, P);
    } else {
      gemm(true, false, CKK, P, s.OC, 1.0f, weight, CKK, g, P, 0.0f, col, P);
      col2im(dimage, col, s);
    }
  }
}

}  // namespace shardtrain::cpu
