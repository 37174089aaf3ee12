#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/vec_math.h"
#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

double sigmoid_ref(double g) { return 1.0 / (1.0 + std::exp(-g)); }

TEST(SwiGlu, ForwardMatchesDoubleReference) {
  const int64_t N = 7, F = 37;
  const auto gu = uniform_vector(size_t(N * 2 * F), 1, -10.0f, 10.0f);
  std::vector<float> h(size_t(N * F), kNaN);
  swiglu_forward(h.data(), gu.data(), N, F);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < F; ++i) {
      const double g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i];
      const double want = g * sigmoid_ref(g) * u;
      EXPECT_NEAR(h[n * F + i], want, 1e-6 * std::fabs(want) + 1e-30) << n << "," << i;
    }
}

TEST(SwiGlu, BackwardMatchesDerivative) {
  const int64_t N = 5, F = 29;
  const auto gu = uniform_vector(size_t(N * 2 * F), 2, -12.0f, 12.0f), dh = uniform_vector(size_t(N * F), 3);
  std::vector<float> dgu(size_t(N * 2 * F), kNaN);
  swiglu_backward(dgu.data(), dh.data(), gu.data(), N, F);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < F; ++i) {
      const double g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i], d = dh[n * F + i];
      const double s = sigmoid_ref(g);
      const double want_dg = d * u * (s + g * s * (1.0 - s)), want_du = d * g * s;
      // silu' crosses 0 near g = -1.28, where 1 + g sigmoid(-g) cancels: its
      // float rounding (an ulp of 1 + |g|) sets an absolute floor there.
      const double floor = 2.5e-7 * std::fabs(d * u) * s * (1.0 + std::fabs(g));
      EXPECT_NEAR(dgu[n * 2 * F + i], want_dg, 2e-6 * std::fabs(want_dg) + floor) << n << "," << i;
      EXPECT_NEAR(dgu[n * 2 * F + F + i], want_du, 1e-6 * std::fabs(want_du) + 1e-30) << n << "," << i;
    }
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, F = 11;
  auto gu = uniform_vector(size_t(N * 2 * F), 4, -4.0f, 4.0f);
  const auto R = uniform_vector(size_t(N * F), 5);
  std::vector<float> h(size_t(N * F));
  auto loss = [&] {
    swiglu_forward(h.data(), gu.data(), N, F);
    return dot(h, R);
  };
  std::vector<float> dgu(gu.size(), kNaN);
  swiglu_backward(dgu.data(), R.data(), gu.data(), N, F);
  expect_gradient(gu, dgu, loss, 1e-3f, 1e-2, "dgu");
}

// Far past exp's range on both sides: silu(g) -> g for g >> 0 and -> 0 for
// g << 0, the gradient -> u and 0; nothing overflows into inf or NaN.
TEST(SwiGlu, LargeGatesStayFinite) {
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> gates = {1e30f, -1e30f, big,   -big,   1e4f, -1e4f, 100.0f, -100.0f,
                                    88.0f, -88.0f, 87.0f, -87.0f, 0.0f, -0.0f, 1e-30f, -1e-30f};
  const auto F = int64_t(gates.size());
  std::vector<float> gu(size_t(2 * F));
  for (int64_t i = 0; i < F; ++i) {
    gu[i] = gates[i];
    gu[F + i] = 0.5f;  // u < 1, so silu(g) * u stays below FLT_MAX
  }
  const std::vector<float> dh(size_t(F), 0.25f);
  std::vector<float> h(size_t(F), kNaN), dgu(size_t(2 * F), kNaN);
  swiglu_forward(h.data(), gu.data(), 1, F);
  swiglu_backward(dgu.data(), dh.data(), gu.data(), 1, F);
  for (int64_t i = 0; i < F; ++i) {
    const float g = gates[i];
    ASSERT_TRUE(std::isfinite(h[i])) << g;
    ASSERT_TRUE(std::isfinite(dgu[i])) << g;
    ASSERT_TRUE(std::isfinite(dgu[F + i])) << g;
    if (g >= 100.0f) {
      EXPECT_EQ(h[i], g * 0.5f) << g;
      EXPECT_EQ(dgu[i], 0.25f * 0.5f) << g;
      EXPECT_EQ(dgu[F + i], 0.25f * g) << g;
    } else if (g <= -100.0f) {
      EXPECT_EQ(h[i], 0.0f) << g;
      EXPECT_EQ(dgu[i], 0.0f) << g;
      EXPECT_EQ(dgu[F + i], 0.0f) << g;
    }
  }
}

// The kernels run as compiled for this CPU's widest vectors (ST_VECTOR_CLONES);
// swiglu.cpp's arithmetic, compiled here for the portable baseline, in the
// same order, must give the same bits (odd F: the clones' tails too).
TEST(SwiGlu, SameBitsAsThePortableBuild) {
  const int64_t N = 3, F = 1031;
  auto gu = uniform_vector(size_t(N * 2 * F), 6, -12.0f, 12.0f);
  gu[0] = 1e30f;
  gu[1] = -1e30f;
  gu[2] = -0.0f;
  gu[3] = std::numeric_limits<float>::denorm_min();
  const auto dh = uniform_vector(size_t(N * F), 7);
  std::vector<float> h(size_t(N * F), kNaN), dgu(size_t(N * 2 * F), kNaN);
  swiglu_forward(h.data(), gu.data(), N, F);
  swiglu_backward(dgu.data(), dh.data(), gu.data(), N, F);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < F; ++i) {
      const float g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i], d = dh[n * F + i];
      const float e = detail::exp_nonpos(-std::fabs(g));
      const float inv = 1.0f / (1.0f + e);
      const float sig = (g >= 0.0f ? 1.0f : e) * inv, sig_neg = (g >= 0.0f ? e : 1.0f) * inv;
      const float silu = g * sig;
      const float want_h = silu * u;
      const float want_dg = (d * u) * (sig * (1.0f + g * sig_neg));
      const float want_du = d * silu;
      ASSERT_EQ(std::memcmp(&h[n * F + i], &want_h, sizeof(float)), 0) << "forward, g = " << g;
      ASSERT_EQ(std::memcmp(&dgu[n * 2 * F + i], &want_dg, sizeof(float)), 0) << "dgate, g = " << g;
      ASSERT_EQ(std::memcmp(&dgu[n * 2 * F + F + i], &want_du, sizeof(float)), 0) << "dup, g = " << g;
    }
}

TEST(SwiGlu, EmptyIsANoOp) {
  std::vector<float> h(4, 1.0f), dgu(8, 2.0f);
  const std::vector<float> gu(8, 1.0f), dh(4, 1.0f);
  swiglu_forward(h.data(), gu.data(), 0, 4);
  swiglu_backward(dgu.data(), dh.data(), gu.data(), 0, 4);
  EXPECT_EQ(h, std::vector<float>(4, 1.0f));
  EXPECT_EQ(dgu, std::vector<float>(8, 2.0f));
}

}  // namespace
}  // namespace shardtrain::cpu
