#include "kernels/cpu/one_tile_attention.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace shardtrain::cpu {
namespace {

// flash_attention.cpp's tile edge: up to it, a head's scores are one tile.
constexpr int64_t kTile = 64;
// A chunk's backward working set: the core's L2 holds it (1 MiB, or 2 MiB
// on newer Xeons), so each block a product writes is still there for the
// next product or row pass that reads it.
constexpr int64_t kChunkFloats = int64_t(1) << 18;

// A tensor of f32 values, or of bf16 ones (mixed precision's activations).
struct Values {
  const void* data;
  bool is_bf16;
  const void* at(int64_t i) const { return static_cast<const char*>(data) + i * (is_bf16 ? 2 : 4); }
  void* at_mut(int64_t i) const { return const_cast<void*>(at(i)); }
};

// Where a chunk's heads sit in a tensor of rows [B, T, ld]: `count` heads of
// hs values each, the first at column `col`.
struct Heads {
  int64_t ld, col, count;
};

// f(r, k) for each head's row of hs values in a chunk: row (b, t) of a
// tensor at (b * T + t) * ld, head h's values at r = that + h * hs; in the
// chunk's dense [nb, heads, T, hs] block at k = ((b * heads + h) * T + t) * hs.
template <class F>
inline void each_head_row(int64_t ld, int64_t nb, int64_t heads, int64_t T, int64_t hs, F&& f) {
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h) f((b * T + t) * ld + h * hs, ((b * heads + h) * T + t) * hs);
}

// The copies between rows and a block that convert as they go, each one
// call over the whole chunk (a call per head's row of a few dozen values
// would cost about as much as converting them); each_head_row is inlined
// into every clone.
ST_VECTOR_CLONES void round_into_block(bf16* block, const float* rows, int64_t ld, int64_t nb, int64_t heads, int64_t T,
                                       int64_t hs) {
  each_head_row(ld, nb, heads, T, hs, [&](int64_t r, int64_t k) {
    for (int64_t i = 0; i < hs; ++i) block[k + i].bits = detail::bf16_bits(rows[r + i]);
  });
}
ST_VECTOR_CLONES void widen_into_block(float* block, const bf16* rows, int64_t ld, int64_t nb, int64_t heads, int64_t T,
                                       int64_t hs) {
  each_head_row(ld, nb, heads, T, hs, [&](int64_t r, int64_t k) {
    for (int64_t i = 0; i < hs; ++i) block[k + i] = to_f32(rows[r + i]);
  });
}
ST_VECTOR_CLONES void round_out_of_block(bf16* rows, int64_t ld, const float* block, int64_t nb, int64_t heads,
                                         int64_t T, int64_t hs) {
  each_head_row(ld, nb, heads, T, hs, [&](int64_t r, int64_t k) {
    for (int64_t i = 0; i < hs; ++i) rows[r + i].bits = detail::bf16_bits(block[k + i]);
  });
}
template <class E>
void copy_into_block(E* block, const E* rows, int64_t ld, int64_t nb, int64_t heads, int64_t T, int64_t hs) {
  each_head_row(ld, nb, heads, T, hs, [&](int64_t r, int64_t k) { std::copy_n(rows + r, hs, block + k); });
}

// Sequences [b0, b0 + nb) of the heads `at` of `src` into a block of E:
// copied, widened exactly, or rounded to bf16 as gemm_batched() would round
// them on each call.
template <class E>
void to_block(E* block, const Values& src, Heads at, int64_t b0, int64_t nb, int64_t T, int64_t hs) {
  const int64_t first = b0 * T * at.ld + at.col;
  if constexpr (std::is_same_v<E, float>) {
    if (src.is_bf16)
      widen_into_block(block, static_cast<const bf16*>(src.at(first)), at.ld, nb, at.count, T, hs);
    else
      copy_into_block(block, static_cast<const float*>(src.at(first)), at.ld, nb, at.count, T, hs);
  } else {
    if (src.is_bf16)
      copy_into_block(block, static_cast<const bf16*>(src.at(first)), at.ld, nb, at.count, T, hs);
    else
      round_into_block(block, static_cast<const float*>(src.at(first)), at.ld, nb, at.count, T, hs);
  }
}

// The f32 block's values out to the heads `at` of `dst`.
void from_block(const Values& dst, Heads at, int64_t b0, int64_t nb, int64_t T, int64_t hs, const float* block) {
  const int64_t first = b0 * T * at.ld + at.col;
  if (dst.is_bf16) {
    round_out_of_block(static_cast<bf16*>(dst.at_mut(first)), at.ld, block, nb, at.count, T, hs);
    return;
  }
  auto* rows = static_cast<float*>(dst.at_mut(first));
  each_head_row(at.ld, nb, at.count, T, hs, [&](int64_t r, int64_t k) { std::copy_n(block + k, hs, rows + r); });
}

// One batched product on blocks of E (bf16 blocks: gemm_bf16_batched).
void batched(int64_t n, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
             int64_t sa, const float* B, int64_t ldb, int64_t sb, float* C, int64_t ldc, int64_t sc) {
  gemm_batched(n, ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc);
}
void batched(int64_t n, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
             int64_t sa, const bf16* B, int64_t ldb, int64_t sb, float* C, int64_t ldc, int64_t sc) {
  gemm_bf16_batched(n, ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc);
}

// Typed blocks carved one after another out of a float workspace, each
// rounded up to 64 bytes. With no workspace it only counts the floats.
class Carve {
 public:
  explicit Carve(float* base) : base_(base) {}
  template <class T>
  T* take(int64_t n) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += (n * int64_t(sizeof(T)) + 63) / 64 * 16;
    return p;
  }
  int64_t floats() const { return used_; }

 private:
  float* base_;
  int64_t used_ = 0;
};

// The products' operands for a chunk of nb sequences, in dense blocks of E
// (f32, or bf16 where the products take bf16 operands). With N = nb * KV
// key/value heads and G = H / KV query heads to each, the query rows of a key
// head's G heads are one [G * T, hs] block (head h = kv * G + g, so the query
// heads of a group are adjacent), and every product below is a batch of N.
template <class E>
struct Blocks {
  int64_t nb, T, H, KV, hs;
  E *q = nullptr, *k = nullptr, *v = nullptr;  // [nb, H, T, hs], [nb, KV, T, hs] twice
  float* s = nullptr;                          // scores, then probabilities: [nb, H, T, T]
  E* p = nullptr;                              // the probabilities as an operand: s itself in f32, else their bf16 copy
  int64_t N() const { return nb * KV; }
  int64_t GT() const { return H / KV * T; }
  static constexpr bool kF32 = std::is_same_v<E, float>;

  void carve(Carve& c) {
    q = c.take<E>(nb * H * T * hs);
    k = c.take<E>(nb * KV * T * hs);
    v = c.take<E>(nb * KV * T * hs);
    s = c.take<float>(nb * H * T * T);
    if constexpr (kF32)
      p = s;
    else
      p = c.take<E>(nb * H * T * T);
  }
};

float* workspace(int64_t floats) {
  thread_local std::vector<float> w;
  if (w.size() < size_t(floats)) w.resize(size_t(floats));
  return w.data();
}

// Copies sequences [b0, b0 + nb) of qkv's heads into the blocks.
template <class E>
void gather(const Blocks<E>& x, const Values& qkv, int64_t b0) {
  const int64_t C3 = (x.H + 2 * x.KV) * x.hs;
  to_block(x.q, qkv, {C3, 0, x.H}, b0, x.nb, x.T, x.hs);
  to_block(x.k, qkv, {C3, x.H * x.hs, x.KV}, b0, x.nb, x.T, x.hs);
  to_block(x.v, qkv, {C3, (x.H + x.KV) * x.hs, x.KV}, b0, x.nb, x.T, x.hs);
}

// S = Q K^T / sqrt(hs) for every head of the chunk.
template <class E>
void scores(const Blocks<E>& x) {
  const int64_t T = x.T, hs = x.hs, GT = x.GT();
  batched(x.N(), false, true, GT, T, hs, 1.0f / std::sqrt(float(hs)), x.q, hs, GT * hs, x.k, hs, T * hs, x.s, T,
          GT * T);
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

// Row r of a [rows, T] block of probabilities (or their gradients) as the
// next product's operand: nothing to do in f32; in bf16 the row's computed
// keys rounded, while the row is still in L1, and the rest (0 in f32 too)
// zero. The same bits as rounding the whole block.
ST_VECTOR_CLONES void round_row_bf16(bf16* dst, const float* src, int64_t T, int64_t visible) {
  const int64_t n = computed_keys(T, visible);
  for (int64_t j = 0; j < n; ++j) dst[j].bits = detail::bf16_bits(src[j]);
  for (int64_t j = n; j < T; ++j) dst[j].bits = 0;
}
template <class E>
void operand_row(E* block, const float* values, int64_t r, int64_t T) {
  if constexpr (!std::is_same_v<E, float>) round_row_bf16(block + r * T, values + r * T, T, r % T + 1);
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

template <class E>
void forward_chunks(const Values& out, float* lse, const Values& qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                    int64_t hs) {
  const int64_t chunk = one_tile_attention_chunk(B, T, H, KV, hs), HC = H * hs, GT = H / KV * T;
  // The chunk's blocks, and O (in q's block where that is f32: the queries are spent by then).
  auto layout = [&](Blocks<E>& x, Carve& c) {
    x.carve(c);
    if constexpr (Blocks<E>::kF32)
      return x.q;
    else
      return c.take<float>(x.nb * H * T * hs);
  };
  Blocks<E> sizing{chunk, T, H, KV, hs};
  Carve count(nullptr);
  layout(sizing, count);
  float* w = workspace(count.floats());
  for (int64_t b0 = 0; b0 < B; b0 += chunk) {
    const int64_t nb = std::min(chunk, B - b0);
    Blocks<E> x{nb, T, H, KV, hs};
    Carve c(w);
    float* o = layout(x, c);
    gather(x, qkv, b0);
    scores(x);
    float* L = lse + b0 * H * T;  // [B, H, T]: the blocks' row order
    for (int64_t r = 0; r < nb * H * T; ++r) {
      L[r] = softmax_row(x.s + r * T, T, r % T + 1);
      operand_row(x.p, x.s, r, T);
    }
    // O = P V.
    batched(x.N(), false, false, GT, hs, T, 1.0f, x.p, T, GT * T, x.v, hs, T * hs, o, hs, GT * hs);
    from_block(out, {HC, 0, H}, b0, nb, T, hs, o);
  }
}

template <class E>
void backward_chunks(const Values& dqkv, const float* dout, const Values& qkv, const Values& out, const float* lse,
                     int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  const int64_t chunk = one_tile_attention_chunk(B, T, H, KV, hs), HC = H * hs, C3 = (H + 2 * KV) * hs;
  const int64_t GT = H / KV * T;
  struct Grads {
    E *dO, *ds16;
    float *ds, *dq, *dk, *dv, *D;
  };
  // The forward's blocks; dO; dP then dS (and dS as an operand: ds itself in
  // f32); the gradients; and D.
  auto layout = [&](Blocks<E>& x, Carve& c) {
    x.carve(c);
    Grads g{};
    const int64_t nb = x.nb;
    g.dO = c.take<E>(nb * H * T * hs);
    g.ds = c.take<float>(nb * H * T * T);
    if constexpr (Blocks<E>::kF32)
      g.ds16 = g.ds;
    else
      g.ds16 = c.take<E>(nb * H * T * T);
    g.dq = c.take<float>(nb * H * T * hs);
    g.dk = c.take<float>(nb * KV * T * hs);
    g.dv = c.take<float>(nb * KV * T * hs);
    g.D = c.take<float>(nb * H * T);
    return g;
  };
  Blocks<E> sizing{chunk, T, H, KV, hs};
  Carve count(nullptr);
  layout(sizing, count);
  float* w = workspace(count.floats());
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int64_t b0 = 0; b0 < B; b0 += chunk) {
    const int64_t nb = std::min(chunk, B - b0), N = nb * KV;
    Blocks<E> x{nb, T, H, KV, hs};
    Carve c(w);
    const Grads g = layout(x, c);
    gather(x, qkv, b0);
    // dO in q's layout, and D = dO . O per row (the softmax backward's row
    // term; O widened into dq's block, not yet written, where it is bf16).
    to_block(g.dO, Values{dout, false}, {HC, 0, H}, b0, nb, T, hs);
    if (out.is_bf16) to_block(g.dq, out, {HC, 0, H}, b0, nb, T, hs);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t src = ((b0 + b) * T + t) * HC + h * hs, row = (b * H + h) * T + t;
          const float* o = out.is_bf16 ? g.dq + row * hs : static_cast<const float*>(out.at(src));
          g.D[row] = dot(dout + src, o, hs);
        }
    scores(x);
    const float* L = lse + b0 * H * T;
    for (int64_t r = 0; r < nb * H * T; ++r) {
      probabilities_row(x.s + r * T, T, r % T + 1, L[r]);
      operand_row(x.p, x.s, r, T);
    }
    // dV = P^T dO (summed over the group's heads by the product's inner dimension); dP = dO V^T.
    batched(N, true, false, T, hs, GT, 1.0f, x.p, T, GT * T, g.dO, hs, GT * hs, g.dv, hs, T * hs);
    batched(N, false, true, GT, T, hs, 1.0f, g.dO, hs, GT * hs, x.v, hs, T * hs, g.ds, T, GT * T);
    for (int64_t r = 0; r < nb * H * T; ++r) {
      softmax_backward_row(g.ds + r * T, x.s + r * T, T, r % T + 1, g.D[r]);
      operand_row(g.ds16, g.ds, r, T);
    }
    // dQ = scale dS K;  dK = scale dS^T Q.
    batched(N, false, false, GT, hs, T, scale, g.ds16, T, GT * T, x.k, hs, T * hs, g.dq, hs, GT * hs);
    batched(N, true, false, T, hs, GT, scale, g.ds16, T, GT * T, x.q, hs, GT * hs, g.dk, hs, T * hs);
    from_block(dqkv, {C3, 0, H}, b0, nb, T, hs, g.dq);
    from_block(dqkv, {C3, H * hs, KV}, b0, nb, T, hs, g.dk);
    from_block(dqkv, {C3, (H + KV) * hs, KV}, b0, nb, T, hs, g.dv);
  }
}

}  // namespace

bool one_tile_attention_fits(int64_t T) { return T <= kTile; }

int64_t one_tile_attention_chunk(int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  return std::max<int64_t>(1, std::min(B, kChunkFloats / backward_floats_per_sequence(T, H, KV, hs)));
}

void one_tile_attention_forward(void* out, bool out_bf16, float* lse, const void* qkv, bool qkv_bf16, int64_t B,
                                int64_t T, int64_t H, int64_t KV, int64_t hs) {
  check_one_tile_sizes("one_tile_attention_forward", B, T, H, KV, hs);
  const Values o{out, out_bf16}, x{qkv, qkv_bf16};
  if (bf16_operand_products())
    forward_chunks<bf16>(o, lse, x, B, T, H, KV, hs);
  else
    forward_chunks<float>(o, lse, x, B, T, H, KV, hs);
}

void one_tile_attention_backward(void* dqkv, bool dqkv_bf16, const float* dout, const void* qkv, bool qkv_bf16,
                                 const void* out, bool out_bf16, const float* lse, int64_t B, int64_t T, int64_t H,
                                 int64_t KV, int64_t hs) {
  check_one_tile_sizes("one_tile_attention_backward", B, T, H, KV, hs);
  const Values dx{dqkv, dqkv_bf16}, x{qkv, qkv_bf16}, o{out, out_bf16};
  if (bf16_operand_products())
    backward_chunks<bf16>(dx, dout, x, o, lse, B, T, H, KV, hs);
  else
    backward_chunks<float>(dx, dout, x, o, lse, B, T, H, KV, hs);
}

}  // namespace shardtrain::cpu
