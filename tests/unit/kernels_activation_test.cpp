#include "kernels/cpu/activation.h"

#include "kernels/cpu/vec_math.h"
#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::away_from_zero;
using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double gelu_grad_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x);
}

TEST(Relu, ForwardInPlace) {
  std::vector<float> x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e-30f};
  relu_forward(x.data(), x.data(), int64_t(x.size()));
  EXPECT_EQ(x, (std::vector<float>{0, 0, 0, 0.5f, 3.0f, 0}));
}

TEST(Relu, BackwardMatchesFiniteDifferences) {
  // |x| >= 0.1 and a step of 1e-2: no probe crosses the kink.
  auto x = away_from_zero(37, 1, 0.1f, 2.0f);
  const auto R = uniform_vector(x.size(), 2);
  std::vector<float> out(x.size()), din(x.size());
  const int64_t n = int64_t(x.size());
  relu_forward(out.data(), x.data(), n);
  relu_backward(din.data(), R.data(), out.data(), n);
  expect_gradient(
      x, din,
      [&] {
        relu_forward(out.data(), x.data(), n);
        return dot(out, R);
      },
      1e-2f, 1e-4, "relu din");
  // din may alias dout.
  auto g = R;
  relu_backward(g.data(), g.data(), out.data(), n);
  EXPECT_EQ(g, din);
}

TEST(Gelu, ForwardMatchesTanhFormula) {
  std::vector<float> x = uniform_vector(1001, 3, -8.0f, 8.0f);
  for (float v : {0.0f, -0.0f, 1e-20f, -1e-6f, 20.0f, -20.0f, 100.0f, -100.0f, 1e30f, -1e30f}) x.push_back(v);
  std::vector<float> y(x.size());
  gelu_forward(y.data(), x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = gelu_ref(x[i]);
    EXPECT_NEAR(y[i], ref, 1e-7 + 1e-6 * std::fabs(ref)) << "x = " << x[i];
  }
}

TEST(Gelu, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {inf, -1e30f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(3);
  gelu_forward(y.data(), x.data(), 3);
  EXPECT_EQ(y[0], inf);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));  // a diverged activation stays visible
}

// Past |x| ~ 5e19 the derivative of the cubic overflows where sech^2 is 0:
// the gradient is the limit (1 for large x, 0 for very negative x), not NaN.
TEST(Gelu, BackwardIsFiniteForHugeInputs) {
  const float big = std::numeric_limits<float>::max();
  std::vector<float> x = {1e20f, -1e20f, big, -big, 6e19f, -6e19f};
  std::vector<float> dout(x.size(), 2.0f), din(x.size());
  gelu_backward(din.data(), dout.data(), x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(din[i], x[i] > 0 ? 2.0f : 0.0f) << "x = " << x[i];
}

TEST(Gelu, BackwardMatchesDerivativeAndFiniteDifferences) {
  auto x = uniform_vector(53, 4, -5.0f, 5.0f);
  const auto R = uniform_vector(x.size(), 5);
  const int64_t n = int64_t(x.size());
  std::vector<float> out(x.size()), din(x.size());
  gelu_backward(din.data(), R.data(), x.data(), n);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(din[i], gelu_grad_ref(x[i]) * R[i], 1e-6) << "x = " << x[i];
  expect_gradient(
      x, din,
      [&] {
        gelu_forward(out.data(), x.data(), n);
        return dot(out, R);
      },
      1e-3f, 1e-2, "gelu din");
  // In place: din aliases dout.
  auto g = R;
  gelu_backward(g.data(), g.data(), x.data(), n);
  EXPECT_EQ(g, din);
}

// The kernels run as compiled for this CPU's widest vectors (ST_VECTOR_CLONES:
// AVX-512 or AVX2 where present); the same formula compiled here for the
// portable baseline must give the same bits, element by element.
TEST(Gelu, SameBitsAsThePortableBuild) {
  std::vector<float> x = uniform_vector(4099, 7, -9.0f, 9.0f);  // odd length: the clones' tails too
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 60.0f, -60.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  const auto n = int64_t(x.size());
  std::vector<float> dout = uniform_vector(x.size(), 8, -1.0f, 1.0f);
  std::vector<float> out(x.size()), din(x.size()), want_out(x.size()), want_din(x.size());
  gelu_forward(out.data(), x.data(), n);
  gelu_backward(din.data(), dout.data(), x.data(), n);
  const float k = 0.7978845608028654f, c = 0.044715f;
  for (size_t i = 0; i < x.size(); ++i) {  // activation.cpp's arithmetic, in the same order
    const float v = x[i];
    const float u = k * (v + c * v * v * v);
    float sech2;
    const float s = detail::sigmoid_2u(u, &sech2);
    want_out[i] = v * s;
    const float du = k * (1.0f + 3.0f * c * v * v);
    const float term = sech2 > 0.0f ? 0.5f * v * sech2 * du : 0.0f;
    want_din[i] = (s + term) * dout[i];
  }
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::memcmp(&out[i], &want_out[i], sizeof(float)), 0) << "forward, x = " << x[i];
    ASSERT_EQ(std::memcmp(&din[i], &want_din[i], sizeof(float)), 0) << "backward, x = " << x[i];
  }
}

}  // namespace
}  // namespace shardtrain::cpu
