#include "kernels/cpu/rope.h"

#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::error_of;
using testing::expect_gradient;
using testing::uniform_vector;

constexpr float kTheta = 10000.0f;

// A fused qkv row of a grouped-query block: H query heads, KV key heads, KV
// value heads, then `extra` columns past them; rope rotates the first H + KV.
struct Layout {
  int64_t B, T, H, KV, hs, extra;
  int64_t n_heads() const { return H + KV; }
  int64_t row() const { return (H + 2 * KV) * hs + extra; }
  int64_t size() const { return B * T * row(); }
};

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<uint32_t>(v[i]);
  return out;
}

void forward(std::vector<float>& x, const Layout& l, float theta = kTheta) {
  rope_forward(x.data(), l.B, l.T, l.row(), l.n_heads(), l.hs, theta);
}
void backward(std::vector<float>& x, const Layout& l, float theta = kTheta) {
  rope_backward(x.data(), l.B, l.T, l.row(), l.n_heads(), l.hs, theta);
}

TEST(Rope, ForwardMatchesDoubleReference) {
  // The second layout runs positions to 3000: angles computed in float would
  // be off by ~1e-4 radians there; the double angles keep every element
  // within a few float ulps.
  for (const Layout l : {Layout{2, 5, 3, 1, 8, 3}, Layout{1, 3000, 1, 1, 64, 0}}) {
    const auto x0 = uniform_vector(size_t(l.size()), 1, -1.0f, 1.0f);
    auto x = x0;
    forward(x, l);
    const int64_t half = l.hs / 2;
    for (int64_t r = 0; r < l.B * l.T; ++r) {
      const double t = double(r % l.T);
      for (int64_t h = 0; h < l.n_heads(); ++h) {
        for (int64_t i = 0; i < half; ++i) {
          const int64_t lo = r * l.row() + h * l.hs + i, hi = lo + half;
          const double angle = t * std::pow(double(kTheta), -2.0 * double(i) / double(l.hs));
          const double a = x0[lo], b = x0[hi];
          ASSERT_NEAR(x[lo], a * std::cos(angle) - b * std::sin(angle), 4e-7) << r << "," << h << "," << i;
          ASSERT_NEAR(x[hi], b * std::cos(angle) + a * std::sin(angle), 4e-7) << r << "," << h << "," << i;
        }
      }
    }
  }
}

TEST(Rope, PositionZeroIsTheIdentity) {
  const Layout l{3, 4, 2, 2, 16, 5};
  const auto x0 = uniform_vector(size_t(l.size()), 2, 0.5f, 2.0f);  // no zeros: no -0 + 0 to differ in sign
  auto x = x0, dx = x0;
  forward(x, l);
  backward(dx, l);
  for (int64_t b = 0; b < l.B; ++b) {
    const int64_t first = b * l.T * l.row();
    for (int64_t c = 0; c < l.row(); ++c) {
      EXPECT_EQ(x[first + c], x0[first + c]) << b << "," << c;
      EXPECT_EQ(dx[first + c], x0[first + c]) << b << "," << c;
    }
  }
}

TEST(Rope, RotationPreservesEachPairsNorm) {
  const Layout l{2, 17, 4, 2, 32, 0};
  const auto x0 = uniform_vector(size_t(l.size()), 3, -3.0f, 3.0f);
  auto x = x0;
  forward(x, l);
  const int64_t half = l.hs / 2;
  for (int64_t r = 0; r < l.B * l.T; ++r)
    for (int64_t h = 0; h < l.n_heads(); ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t lo = r * l.row() + h * l.hs + i, hi = lo + half;
        const double before = double(x0[lo]) * x0[lo] + double(x0[hi]) * x0[hi];
        const double after = double(x[lo]) * x[lo] + double(x[hi]) * x[hi];
        ASSERT_NEAR(after, before, 1e-6 * before + 1e-12) << r << "," << h << "," << i;
      }
}

// <R x, y> == <x, R^T y>: rope_backward is the transpose of rope_forward, and
// (the rotation being orthogonal) undoes it.
TEST(Rope, BackwardIsTheTransposeAndTheInverse) {
  const Layout l{2, 9, 3, 1, 12, 2};
  const auto x = uniform_vector(size_t(l.size()), 4), y = uniform_vector(size_t(l.size()), 5);
  auto rx = x, rty = y;
  forward(rx, l);
  backward(rty, l);
  const double lhs = dot(rx, y), rhs = dot(x, rty);
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::fabs(lhs) + 1e-5);
  auto back = rx;
  backward(back, l);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(back[i], x[i], 1e-6) << i;
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  const Layout l{2, 3, 2, 1, 8, 1};
  auto x = uniform_vector(size_t(l.size()), 6);
  const auto R = uniform_vector(size_t(l.size()), 7);
  std::vector<float> y(x.size());
  auto loss = [&] {
    y = x;
    forward(y, l);
    return dot(y, R);
  };
  auto dx = R;
  backward(dx, l);
  expect_gradient(x, dx, loss, 1e-2f, 1e-3, "dx");
}

// The value heads and the columns past them: not one bit changes.
TEST(Rope, LeavesColumnsPastTheHeadsUntouched) {
  const Layout l{2, 6, 2, 1, 10, 7};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x0 = uniform_vector(size_t(l.size()), 8);
  const int64_t rotated = l.n_heads() * l.hs;
  for (int64_t r = 0; r < l.B * l.T; ++r) x0[r * l.row() + rotated + 1] = nan;  // NaN stays where it is
  auto x = x0, dx = x0;
  forward(x, l);
  backward(dx, l);
  for (int64_t r = 0; r < l.B * l.T; ++r)
    for (int64_t c = rotated; c < l.row(); ++c) {
      const int64_t k = r * l.row() + c;
      ASSERT_EQ(std::bit_cast<uint32_t>(x[k]), std::bit_cast<uint32_t>(x0[k])) << r << "," << c;
      ASSERT_EQ(std::bit_cast<uint32_t>(dx[k]), std::bit_cast<uint32_t>(x0[k])) << r << "," << c;
    }
  // n_heads = 0 rotates nothing.
  auto none = x0;
  rope_forward(none.data(), l.B, l.T, l.row(), 0, l.hs, kTheta);
  EXPECT_EQ(bits(none), bits(x0));
}

// The cos/sin table is cached per thread for the last (T, hs, theta): calls
// with other shapes in between must not change the bits.
TEST(Rope, SameBitsAcrossShapesAndRuns) {
  const Layout l{2, 7, 2, 1, 16, 0};
  const auto x0 = uniform_vector(size_t(l.size()), 9);
  auto first = x0;
  forward(first, l);
  auto other = x0;
  rope_forward(other.data(), 1, 5, l.row(), 1, 8, kTheta);  // another table
  forward(other, Layout{2, 7, 2, 1, 16, 0}, 500000.0f);     // and another theta
  auto again = x0;
  forward(again, l);
  EXPECT_EQ(bits(again), bits(first));
}

TEST(Rope, BadShapesAreErrors) {
  std::vector<float> x(64);
  EXPECT_NE(error_of([&] { rope_forward(x.data(), 1, 2, 32, 2, 7, kTheta); }), "");    // odd head size
  EXPECT_NE(error_of([&] { rope_forward(x.data(), 1, 2, 32, 3, 16, kTheta); }), "");   // heads past the row
  EXPECT_NE(error_of([&] { rope_backward(x.data(), 1, 0, 32, 2, 16, kTheta); }), "");  // T = 0
}

}  // namespace
}  // namespace shardtrain::cpu
