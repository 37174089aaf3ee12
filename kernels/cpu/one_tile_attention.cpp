#include "kernels/cpu/one_tile_attention.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

// flash_attention.cpp's tile edge: up to it, a head's scores are one tile.
constexpr int64_t kTile = 64;
// A chunk's backward working set: the core's L2 holds it (1 MiB, or 2 MiB
// on newer Xeons), so each block a product writes is still there for the
// next product or row pass that reads it.
constexpr int64_t kChunkFloats = int64_t(1) << 18;

// The products' operands for a chunk of nb sequences, in dense blocks. With
// N = nb * KV key/value heads and G = H / KV query heads to each, the query
// rows of a key head's G heads are one [G * T, hs] block (head h = kv * G + g,
// so the query heads of a group are adjacent), and every product below is a
// batch of N.
struct Blocks {
  int64_t nb, T, H, KV, hs;
  float *q, *k, *v;  // [nb, H, T, hs], [nb, KV, T, hs] twice
  float* s;          // scores, then probabilities: [nb, H, T, T]
  int64_t N() const { return nb * KV; }
  int64_t GT() const { return H / KV * T; }
};

std::vector<float>& workspace(int64_t floats) {
  thread_local std::vector<float> w;
  if (w.size() < size_t(floats)) w.resize(size_t(floats));
  return w;
}

// Copies sequences [b0, b0 + nb) of qkv's heads into the blocks.
void gather(const Blocks& x, const float* qkv, int64_t b0) {
  const int64_t C3 = (x.H + 2 * x.KV) * x.hs, hs = x.hs, T = x.T;
  for (int64_t b = 0; b < x.nb; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const float* row = qkv + ((b0 + b) * T + t) * C3;
      for (int64_t h = 0; h < x.H; ++h) std::copy_n(row + h * hs, hs, x.q + ((b * x.H + h) * T + t) * hs);
      for (int64_t j = 0; j < x.KV; ++j) {
        std::copy_n(row + (x.H + j) * hs, hs, x.k + ((b * x.KV + j) * T + t) * hs);
        std::copy_n(row + (x.H + x.KV + j) * hs, hs, x.v + ((b * x.KV + j) * T + t) * hs);
      }
    }
}

// S = Q K^T / sqrt(hs) for every head of the chunk.
void scores(const Blocks& x) {
  const int64_t T = x.T, hs = x.hs, GT = x.GT();
  gemm_batched(x.N(), false, true, GT, T, hs, 1.0f / std::sqrt(float(hs)), x.q, hs, GT * hs, x.k, hs, T * hs, 0.0f, x.s,
               T, GT * T);
}

// The keys a row computes: the visible ones rounded up to a whole number of
// 16 floats (an AVX-512 vector), so that no loop below has a scalar tail;
// past them the row is 0. On average half of a row is hidden by the mask.
int64_t computed_keys(int64_t T, int64_t visible) { return std::min(T, (visible + 15) / 16 * 16); }

// Of the first n keys, those at j >= visible hidden: -inf, which exp_nonpos
// takes to exactly 0; keys from n on set to 0.
ST_VECTOR_CLONES void mask_row(float* p, int64_t n, int64_t T, int64_t visible) {
  const float hidden = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) p[j] = detail::select(j < visible, p[j], hidden);
  std::fill(p + n, p + T, 0.0f);
}

// One row of scores into probabilities in place (hidden keys 0); returns
// the row's log-sum-exp.
ST_VECTOR_CLONES float softmax_row(float* p, int64_t T, int64_t visible) {
  const int64_t n = computed_keys(T, visible);
  mask_row(p, n, T, visible);
  const float m = detail::lane_max(p, n);  // key 0 is visible to every row
  for (int64_t j = 0; j < n; ++j) p[j] = detail::exp_nonpos(p[j] - m);
  const float l = detail::lane_sum(n, [&](int64_t j) { return p[j]; });
  const float inv = 1.0f / l;
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
  return m + std::log(l);
}

// The forward's probabilities again from the scores and the row's lse.
ST_VECTOR_CLONES void probabilities_row(float* p, int64_t T, int64_t visible, float lse) {
  const int64_t n = computed_keys(T, visible);
  mask_row(p, n, T, visible);
  for (int64_t j = 0; j < n; ++j) p[j] = detail::exp_nonpos(p[j] - lse);
}

// dS = P (dP - D) on one row, dP in ds (0 where P is hidden).
ST_VECTOR_CLONES void softmax_backward_row(float* ds, const float* p, int64_t T, int64_t visible, float d) {
  const int64_t n = computed_keys(T, visible);
  for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - d);
  std::fill(ds + n, ds + T, 0.0f);
}

int64_t backward_floats_per_sequence(int64_t T, int64_t H, int64_t KV, int64_t hs) {
  // q, k, v and their gradients; dO; D; P and dS.
  return 2 * (H + 2 * KV) * T * hs + H * T * hs + H * T + 2 * H * T * T;
}

void check_one_tile_sizes(const char* fn, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  ST_CHECK(B > 0 && T > 0 && H > 0 && KV > 0 && hs > 0, "{}: sizes must be positive (B={}, T={}, H={}, KV={}, hs={})",
           fn, B, T, H, KV, hs);
  ST_CHECK(H % KV == 0, "{}: {} query heads do not split into groups over {} key/value heads", fn, H, KV);
  ST_CHECK(T <= kTile, "{}: T = {} is longer than one tile ({})", fn, T, kTile);
}

}  // namespace

bool one_tile_attention_fits(int64_t T) { return T <= kTile; }

int64_t one_tile_attention_chunk(int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  return std::max<int64_t>(1, std::min(B, kChunkFloats / backward_floats_per_sequence(T, H, KV, hs)));
}

void one_tile_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                                int64_t hs) {
  check_one_tile_sizes("one_tile_attention_forward", B, T, H, KV, hs);
  const int64_t chunk = one_tile_attention_chunk(B, T, H, KV, hs), HC = H * hs;
  float* w = workspace(chunk * ((H + 2 * KV) * T * hs + H * T * T)).data();
  for (int64_t b0 = 0; b0 < B; b0 += chunk) {
    const int64_t nb = std::min(chunk, B - b0);
    Blocks x{nb, T, H, KV, hs, w, nullptr, nullptr, nullptr};
    x.k = x.q + nb * H * T * hs;
    x.v = x.k + nb * KV * T * hs;
    x.s = x.v + nb * KV * T * hs;
    gather(x, qkv, b0);
    scores(x);
    float* L = lse + b0 * H * T;  // [B, H, T]: the blocks' row order
    for (int64_t r = 0; r < nb * H * T; ++r) L[r] = softmax_row(x.s + r * T, T, r % T + 1);
    // O = P V into q's block, whose queries are spent.
    float* o = x.q;
    const int64_t GT = x.GT();
    gemm_batched(x.N(), false, false, GT, hs, T, 1.0f, x.s, T, GT * T, x.v, hs, T * hs, 0.0f, o, hs, GT * hs);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          std::copy_n(o + ((b * H + h) * T + t) * hs, hs, out + ((b0 + b) * T + t) * HC + h * hs);
  }
}

void one_tile_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                                 int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  check_one_tile_sizes("one_tile_attention_backward", B, T, H, KV, hs);
  const int64_t chunk = one_tile_attention_chunk(B, T, H, KV, hs), HC = H * hs, C3 = (H + 2 * KV) * hs;
  float* w = workspace(chunk * backward_floats_per_sequence(T, H, KV, hs)).data();
  for (int64_t b0 = 0; b0 < B; b0 += chunk) {
    const int64_t nb = std::min(chunk, B - b0), GT = H / KV * T, N = nb * KV;
    const int64_t qn = nb * H * T * hs, kn = nb * KV * T * hs, sn = nb * H * T * T;
    Blocks x{nb, T, H, KV, hs, w, w + qn, w + qn + kn, w + qn + 2 * kn};
    float* dO = x.s + sn;
    float* ds = dO + qn;
    float* dq = ds + sn;
    float* dk = dq + qn;
    float* dv = dk + kn;
    float* D = dv + kn;
    gather(x, qkv, b0);
    // dO in q's layout, and D = dO . O per row (the softmax backward's row term).
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t src = ((b0 + b) * T + t) * HC + h * hs, row = (b * H + h) * T + t;
          std::copy_n(dout + src, hs, dO + row * hs);
          D[row] = dot(dout + src, out + src, hs);
        }
    scores(x);
    const float* L = lse + b0 * H * T;
    for (int64_t r = 0; r < nb * H * T; ++r) probabilities_row(x.s + r * T, T, r % T + 1, L[r]);
    const float scale = 1.0f / std::sqrt(float(hs));
    // dV = P^T dO (summed over the group's heads by the product's inner dimension); dP = dO V^T.
    gemm_batched(N, true, false, T, hs, GT, 1.0f, x.s, T, GT * T, dO, hs, GT * hs, 0.0f, dv, hs, T * hs);
    gemm_batched(N, false, true, GT, T, hs, 1.0f, dO, hs, GT * hs, x.v, hs, T * hs, 0.0f, ds, T, GT * T);
    for (int64_t r = 0; r < nb * H * T; ++r) softmax_backward_row(ds + r * T, x.s + r * T, T, r % T + 1, D[r]);
    // dQ = scale dS K;  dK = scale dS^T Q.
    gemm_batched(N, false, false, GT, hs, T, scale, ds, T, GT * T, x.k, hs, T * hs, 0.0f, dq, hs, GT * hs);
    gemm_batched(N, true, false, T, hs, GT, scale, ds, T, GT * T, x.q, hs, GT * hs, 0.0f, dk, hs, T * hs);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < T; ++t) {
        float* row = dqkv + ((b0 + b) * T + t) * C3;
        for (int64_t h = 0; h < H; ++h) std::copy_n(dq + ((b * H + h) * T + t) * hs, hs, row + h * hs);
        for (int64_t j = 0; j < KV; ++j) {
          std::copy_n(dk + ((b * KV + j) * T + t) * hs, hs, row + (H + j) * hs);
          std::copy_n(dv + ((b * KV + j) * T + t) * hs, hs, row + (H + KV + j) * hs);
        }
      }
  }
}

}  // namespace shardtrain::cpu
