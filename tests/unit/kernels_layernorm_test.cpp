#include "kernels/cpu/layernorm.h"

#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

constexpr float kEps = 1e-5f;

TEST(LayerNorm, ForwardMatchesDoubleReference) {
  const int64_t N = 4, C = 37;
  auto in = uniform_vector(N * C, 1, -2.0f, 2.0f);
  for (int64_t c = 0; c < C; ++c) in[3 * C + c] += 1000.0f;  // a row with |mean| >> std
  const auto w = uniform_vector(C, 2), b = uniform_vector(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), N, C, kEps);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0.0, v = 0.0;
    for (int64_t c = 0; c < C; ++c) m += in[n * C + c];
    m /= double(C);
    for (int64_t c = 0; c < C; ++c) v += (in[n * C + c] - m) * (in[n * C + c] - m);
    const double s = 1.0 / std::sqrt(v / double(C) + kEps);
    EXPECT_NEAR(mean[n], m, 1e-6 * std::fabs(m) + 1e-6) << n;
    EXPECT_NEAR(rstd[n], s, 1e-4 * s) << n;
    for (int64_t c = 0; c < C; ++c)
      EXPECT_NEAR(out[n * C + c], (in[n * C + c] - m) * s * w[c] + b[c], 1e-4) << n << "," << c;
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 16;
  auto in = uniform_vector(N * C, 4, -2.0f, 2.0f), w = uniform_vector(C, 5, 0.5f, 1.5f);
  auto b = uniform_vector(C, 6);
  const auto R = uniform_vector(N * C, 7);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), N, C, kEps);
    return dot(out, R);
  };
  loss();
  std::vector<float> din(N * C), dw(C), db(C);
  layernorm_backward(din.data(), dw.data(), db.data(), R.data(), in.data(), w.data(), mean.data(), rstd.data(), N, C,
                     false);
  expect_gradient(in, din, loss, 1e-3f, 1e-2, "din");
  expect_gradient(w, dw, loss, 1e-2f, 1e-3, "dweight");
  expect_gradient(b, db, loss, 1e-2f, 1e-3, "dbias");
}

TEST(LayerNorm, AccumulateAddsAndOverwriteIgnoresGarbage) {
  const int64_t N = 5, C = 12;
  const auto in = uniform_vector(N * C, 8), w = uniform_vector(C, 9), b = uniform_vector(C, 10);
  const auto dout = uniform_vector(N * C, 11);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), N, C, kEps);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> din(N * C, nan), dw(C, nan), db(C, nan);
  layernorm_backward(din.data(), dw.data(), db.data(), dout.data(), in.data(), w.data(), mean.data(), rstd.data(), N, C,
                     false);
  for (float v : din) ASSERT_FALSE(std::isnan(v));
  auto dw2 = uniform_vector(C, 12), db2 = uniform_vector(C, 13);
  const auto dw0 = dw2, db0 = db2;
  std::vector<float> din2(N * C, nan);
  layernorm_backward(din2.data(), dw2.data(), db2.data(), dout.data(), in.data(), w.data(), mean.data(), rstd.data(), N,
                     C, true);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(dw2[c], dw0[c] + dw[c], 1e-5) << c;
    EXPECT_NEAR(db2[c], db0[c] + db[c], 1e-5) << c;
  }
  EXPECT_EQ(din2, din);  // din is always overwritten
}

}  // namespace
}  // namespace shardtrain::cpu
