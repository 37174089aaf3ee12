#include "kernels/cpu/flash_attention.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/one_tile_attention.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardtrain::cpu {
namespace {

// Query rows and key columns per tile, measured with
// bench/kernels_attention_bench (B=1, H=12, hs=64, OpenBLAS's Haswell
// kernels, one thread, a shared 2-core VM whose runs vary by 5-10%): from
// T = 1024 to 4096, 64 x 64, 128 x 128, 64 x 128, 128 x 64 and 256 x 256 came
// within that noise of each other (the GEMMs, 80% of the time, run at about
// 50 GFLOP/s against 80 for sgemm at 1024^3); at T = 256-512 the larger tiles
// were 5-30% slower, their diagonal tiles computing more of the masked half.
// 64 x 64 also keeps each tile (scores, and the q, k, v rows they come from)
// at 16 KiB, in L1/L2.
// one_tile_attention.cpp's kTile is this edge: up to it, each head is one
// tile, and that kernel batches the heads' products instead.
constexpr int64_t kBr = 64;
constexpr int64_t kBc = 64;

void check_sizes(const char* fn, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  ST_CHECK(B > 0 && T > 0 && H > 0 && KV > 0 && hs > 0, "{}: sizes must be positive (B={}, T={}, H={}, KV={}, hs={})",
           fn, B, T, H, KV, hs);
  ST_CHECK(H % KV == 0, "{}: {} query heads do not split into groups over {} key/value heads", fn, H, KV);
}

// Key columns of a tile starting at column j0 that query row t may see
// (j <= t), between 0 and cols: the causal mask, by index.
int64_t visible(int64_t t, int64_t j0, int64_t cols) { return std::clamp<int64_t>(t - j0 + 1, 0, cols); }

// p[k] = e^(s[k] - shift) for k < n (shift >= every s[k], up to rounding), 0 for n <= k < cols;
// returns the sum of the n exponentials. p may be s.
ST_VECTOR_CLONES float exp_shifted(float* p, const float* s, int64_t n, int64_t cols, float shift) {
  for (int64_t k = 0; k < n; ++k) p[k] = detail::exp_nonpos(s[k] - shift);
  for (int64_t k = n; k < cols; ++k) p[k] = 0.0f;
  return detail::lane_sum(n, [&](int64_t k) { return p[k]; });
}

ST_VECTOR_CLONES void scale_row(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

// ds[k] = p[k] (ds[k] - d): the softmax's backward on one row, dP in ds.
ST_VECTOR_CLONES void softmax_grad_row(float* ds, const float* p, int64_t n, int64_t cols, float d) {
  for (int64_t k = 0; k < n; ++k) ds[k] = p[k] * (ds[k] - d);
  for (int64_t k = n; k < cols; ++k) ds[k] = 0.0f;
}

// One row of scores of a key tile into probabilities, with the row's
// running max m and sum l (of e^(s - m)) and its output row o so far: the
// first tile starts them, a later one moves them to its new max.
void online_softmax_row(float* row, int64_t n, int64_t cols, bool first, float& m, float& l, float* o, int64_t hs) {
  if (first) {  // n >= 1: column 0 is visible to every row
    m = detail::lane_max(row, n);
    l = exp_shifted(row, row, n, cols, m);
    return;
  }
  const float m_new = n > 0 ? std::max(m, detail::lane_max(row, n)) : m;
  // The sum and output so far were scaled by e^-m; move them to e^-m_new.
  const float alpha = detail::exp_nonpos(m - m_new);
  l = l * alpha + exp_shifted(row, row, n, cols, m_new);
  m = m_new;
  scale_row(o, hs, alpha);
}

}  // namespace

void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                             int64_t hs) {
  check_sizes("flash_attention_forward", B, T, H, KV, hs);
  if (one_tile_attention_fits(T)) return one_tile_attention_forward(out, false, lse, qkv, false, B, T, H, KV, hs);
  const int64_t C3 = (H + 2 * KV) * hs, HC = H * hs, group = H / KV;
  const int64_t br = std::min(kBr, T), bc = std::min(kBc, T);
  const float scale = 1.0f / std::sqrt(float(hs));
  // One tile of scores (then probabilities), the output rows being summed,
  // and each row's running max and sum.
  std::vector<float> work(size_t(br * bc + br * hs + 2 * br));
  float* s = work.data();
  float* o = s + br * bc;
  float* m = o + br * hs;
  float* l = m + br;
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    for (int64_t h = 0; h < H; ++h) {
      const float* q = x + h * hs;
      const float* k = x + (H + h / group) * hs;
      const float* v = x + (H + KV + h / group) * hs;
      for (int64_t i0 = 0; i0 < T; i0 += br) {
        const int64_t rows = std::min(br, T - i0);
        // Key tiles up to the diagonal only; the last one is cut at the
        // tile's last row, and the mask inside it is visible().
        for (int64_t j0 = 0; j0 < i0 + rows; j0 += bc) {
          const int64_t cols = std::min(bc, i0 + rows - j0);
          gemm(false, true, rows, cols, hs, scale, q + i0 * C3, C3, k + j0 * C3, C3, 0.0f, s, bc);
          for (int64_t r = 0; r < rows; ++r)
            online_softmax_row(s + r * bc, visible(i0 + r, j0, cols), cols, j0 == 0, m[r], l[r], o + r * hs, hs);
          // O = alpha O + P V (the first key tile starts O).
          gemm(false, false, rows, hs, cols, 1.0f, s, bc, v + j0 * C3, C3, j0 == 0 ? 0.0f : 1.0f, o, hs);
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* dst = out + (b * T + i0 + r) * HC + h * hs;
          const float inv = 1.0f / l[r];
          for (int64_t i = 0; i < hs; ++i) dst[i] = o[r * hs + i] * inv;
          lse[(b * H + h) * T + i0 + r] = m[r] + std::log(l[r]);
        }
      }
    }
  }
}

int64_t flash_attention_scratch_floats(int64_t T, int64_t hs) {
  ST_CHECK(T > 0 && hs > 0, "flash_attention_scratch_floats: sizes must be positive (T={}, hs={})", T, hs);
  // D (one float per row), then P and dS, one tile each.
  return T + 2 * std::min(kBr, T) * std::min(kBc, T);
}

void flash_attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                              const float* lse, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  check_sizes("flash_attention_backward", B, T, H, KV, hs);
  if (one_tile_attention_fits(T))
    return one_tile_attention_backward(dqkv, false, dout, qkv, false, out, false, lse, B, T, H, KV, hs);
  const int64_t C3 = (H + 2 * KV) * hs, HC = H * hs, group = H / KV;
  const int64_t br = std::min(kBr, T), bc = std::min(kBc, T);
  const float scale = 1.0f / std::sqrt(float(hs));
  float* D = scratch;
  float* p = D + T;
  float* ds = p + br * bc;
  // Every gradient below is a sum over tiles (and, for k and v, over the
  // query heads of a group): all of dqkv starts at 0.
  std::fill(dqkv, dqkv + B * T * C3, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    float* dx = dqkv + b * T * C3;
    for (int64_t h = 0; h < H; ++h) {
      const float* q = x + h * hs;
      const float* k = x + (H + h / group) * hs;
      const float* v = x + (H + KV + h / group) * hs;
      float* dq = dx + h * hs;
      float* dk = dx + (H + h / group) * hs;
      float* dv = dx + (H + KV + h / group) * hs;
      const float* dO = dout + b * T * HC + h * hs;
      const float* O = out + b * T * HC + h * hs;
      const float* L = lse + (b * H + h) * T;
      // D_t = dO_t . O_t = sum_j P_tj dP_tj, the softmax backward's row term.
      for (int64_t t = 0; t < T; ++t) D[t] = dot(dO + t * HC, O + t * HC, hs);
      // Key tiles outside, so each query tile below the diagonal is visited
      // once per key tile and the tiles above it never.
      for (int64_t j0 = 0; j0 < T; j0 += bc) {
        const int64_t cols = std::min(bc, T - j0);
        for (int64_t i0 = j0 / br * br; i0 < T; i0 += br) {
          const int64_t rows = std::min(br, T - i0);
          // P = exp(scale Q K^T - lse), the forward's probabilities again.
          gemm(false, true, rows, cols, hs, scale, q + i0 * C3, C3, k + j0 * C3, C3, 0.0f, p, bc);
          for (int64_t r = 0; r < rows; ++r)
            exp_shifted(p + r * bc, p + r * bc, visible(i0 + r, j0, cols), cols, L[i0 + r]);
          // dV += P^T dO;  dP = dO V^T;  dS = P (dP - D).
          gemm(true, false, cols, hs, rows, 1.0f, p, bc, dO + i0 * HC, HC, 1.0f, dv + j0 * C3, C3);
          gemm(false, true, rows, cols, hs, 1.0f, dO + i0 * HC, HC, v + j0 * C3, C3, 0.0f, ds, bc);
          for (int64_t r = 0; r < rows; ++r)
            softmax_grad_row(ds + r * bc, p + r * bc, visible(i0 + r, j0, cols), cols, D[i0 + r]);
          // dQ += scale dS K;  dK += scale dS^T Q.
          gemm(false, false, rows, hs, cols, scale, ds, bc, k + j0 * C3, C3, 1.0f, dq + i0 * C3, C3);
          gemm(true, false, cols, hs, rows, scale, ds, bc, q + i0 * C3, C3, 1.0f, dk + j0 * C3, C3);
        }
      }
    }
  }
}

}  // namespace shardtrain::cpu
