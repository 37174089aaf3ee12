#include "kernels/cpu/rope.h"

#include "runtime/core/error.h"

#include <cmath>
#include <vector>

namespace shardtrain::cpu {
namespace {

// cos and sin of t * theta^(-2i/hs) for t < T, i < hs/2: [T, hs/2] each.
struct RopeTable {
  int64_t T = 0, hs = 0;
  float theta = 0.0f;
  std::vector<float> cos, sin;
};

// The table of the last (T, hs, theta) this thread asked for: a model calls
// rope for every layer's forward and backward with the same three, and the
// table's T*hs/2 double-precision cos/sin cost more than rotating a few
// heads' worth of rows. Per thread, so concurrent callers share nothing; the
// table is a function of the three alone, so reusing it changes no bits.
const RopeTable& rope_table(int64_t T, int64_t hs, float theta) {
  thread_local RopeTable table;
  if (table.T == T && table.hs == hs && table.theta == theta && !table.cos.empty()) return table;
  const int64_t half = hs / 2;
  table.cos.resize(size_t(T * half));
  table.sin.resize(size_t(T * half));
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(double(theta), -2.0 * double(i) / double(hs));
    for (int64_t t = 0; t < T; ++t) {
      const double angle = double(t) * inv_freq;
      table.cos[size_t(t * half + i)] = float(std::cos(angle));
      table.sin[size_t(t * half + i)] = float(std::sin(angle));
    }
  }
  table.T = T;
  table.hs = hs;
  table.theta = theta;
  return table;
}

void rope_check(int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  ST_CHECK(B >= 0 && T > 0 && n_heads >= 0 && hs > 0 && hs % 2 == 0,
           "rope: B={} T={} n_heads={} hs={} (T and hs must be positive, hs even)", B, T, n_heads, hs);
  ST_CHECK(n_heads * hs <= row, "rope: {} heads of {} do not fit a row of {}", n_heads, hs, row);
  ST_CHECK(theta > 0.0f, "rope: theta {} (must be positive)", theta);
}

// Rotates every pair by +angle (forward) or -angle (kInverse: the transpose).
template <bool kInverse>
void rope_apply(float* x, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  rope_check(B, T, row, n_heads, hs, theta);
  if (B == 0 || n_heads == 0) return;
  const RopeTable& table = rope_table(T, hs, theta);
  const int64_t half = hs / 2;
  for (int64_t r = 0; r < B * T; ++r) {
    const int64_t t = r % T;
    const float* c = table.cos.data() + t * half;
    const float* s = table.sin.data() + t * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* lo = x + r * row + h * hs;
      float* hi = lo + half;
      for (int64_t i = 0; i < half; ++i) {
        const float a = lo[i], b = hi[i];
        if constexpr (kInverse) {
          lo[i] = a * c[i] + b * s[i];
          hi[i] = b * c[i] - a * s[i];
        } else {
          lo[i] = a * c[i] - b * s[i];
          hi[i] = b * c[i] + a * s[i];
        }
      }
    }
  }
}

}  // namespace

void rope_forward(float* x, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  rope_apply<false>(x, B, T, row, n_heads, hs, theta);
}

void rope_backward(float* dx, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  rope_apply<true>(dx, B, T, row, n_heads, hs, theta);
}

}  // namespace shardtrain::cpu
