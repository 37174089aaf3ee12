#include "kernels/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace shardtrain::cpu::detail {
namespace {

TEST(VecMath, ExpNonPosIsWithinAFewUlpOfExp) {
  // A dense sweep of the whole range where e^x is a normal float.
  double worst = 0.0;
  for (float x = 0.0f; x > -87.3f; x -= 0.000731f) {
    const double ref = std::exp(double(x));
    worst = std::max(worst, std::fabs(exp_nonpos(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);  // ~2.5 ulp
  EXPECT_EQ(exp_nonpos(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpos(-0.0f), 1.0f);
}

TEST(VecMath, ExpNonPosUnderflowAndNaN) {
  EXPECT_EQ(exp_nonpos(-87.5f), 0.0f);
  EXPECT_EQ(exp_nonpos(-1e30f), 0.0f);
  EXPECT_EQ(exp_nonpos(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(exp_nonpos(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(exp_nonpos(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, SigmoidOfTwiceU) {
  for (float u : {-30.0f, -5.0f, -0.5f, -1e-3f, 0.0f, 1e-3f, 0.5f, 5.0f, 30.0f}) {
    float sech2 = 0.0f;
    const float s = sigmoid_2u(u, &sech2);
    const double ref = 1.0 / (1.0 + std::exp(-2.0 * u)), c = std::cosh(double(u));
    EXPECT_NEAR(s, ref, 4e-7 * ref) << u;  // relative even where s is tiny
    EXPECT_NEAR(sech2, 1.0 / (c * c), 1e-6 / (c * c)) << u;
  }
}

TEST(VecMath, LaneSumAndMax) {
  // A permutation of -18..18: sums to 0 exactly (small integers), max 18.
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 13 % 37) - 18);
  EXPECT_EQ(lane_sum(int64_t(x.size()), [&](int64_t i) { return x[i]; }), 0.0f);
  EXPECT_EQ(lane_sum(int64_t(x.size()), [&](int64_t i) { return x[i] * x[i]; }), 4218.0f);
  EXPECT_EQ(lane_max(x.data(), int64_t(x.size())), 18.0f);
  EXPECT_EQ(lane_max(x.data(), 1), x[0]);
  EXPECT_EQ(lane_sum(0, [&](int64_t i) { return x[i]; }), 0.0f);
}

TEST(VecMath, SqrtIsTheCorrectlyRoundedSqrt) {
  std::vector<float> in(1001), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) * 0.37f + 1e-30f * float(i % 3);
  sqrt_n(out.data(), in.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], std::sqrt(in[i])) << i;
}

}  // namespace
}  // namespace shardtrain::cpu::detail
