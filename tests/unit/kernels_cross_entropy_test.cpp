#include "kernels/cpu/cross_entropy.h"

#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::expect_gradient;
using testing::uniform_vector;

std::vector<int32_t> random_labels(int64_t N, int64_t C, uint64_t key) {
  Rng rng(key);
  std::vector<int32_t> y(static_cast<size_t>(N));
  for (auto& v : y) v = int32_t(rng.below(uint64_t(C)));
  return y;
}

// log-sum-exp of one row, in double.
double lse_ref(const float* x, int64_t C) {
  double m = x[0];
  for (int64_t i = 1; i < C; ++i) m = std::max(m, double(x[i]));
  double s = 0.0;
  for (int64_t i = 0; i < C; ++i) s += std::exp(double(x[i]) - m);
  return m + std::log(s);
}

TEST(SoftmaxXent, ForwardMatchesDoubleReference) {
  const int64_t N = 7, C = 13;
  const auto x = uniform_vector(N * C, 1, -4.0f, 4.0f);
  const auto y = random_labels(N, C, 2);
  std::vector<float> lse(N);
  const double loss = softmax_xent_forward(x.data(), y.data(), N, C, lse.data());
  double ref = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const double l = lse_ref(&x[n * C], C);
    EXPECT_NEAR(lse[n], l, 1e-6 * std::fabs(l) + 1e-6) << n;
    ref += l - x[n * C + y[n]];
  }
  EXPECT_NEAR(loss, ref, 1e-6 * ref);
  // lse may be null.
  EXPECT_EQ(softmax_xent_forward(x.data(), y.data(), N, C, nullptr), loss);
}

TEST(SoftmaxXent, FusedAgreesWithForwardThenBackward) {
  const int64_t N = 6, C = 29;
  const auto x = uniform_vector(N * C, 3, -6.0f, 6.0f);
  const auto y = random_labels(N, C, 4);
  const float scale = 1.0f / float(N);
  std::vector<float> lse(N), d_unfused(N * C), d_fused(N * C);
  const double loss = softmax_xent_forward(x.data(), y.data(), N, C, lse.data());
  softmax_xent_backward(d_unfused.data(), x.data(), lse.data(), y.data(), N, C, scale);
  const double loss_fused = softmax_xent_fused(d_fused.data(), x.data(), y.data(), N, C, scale);
  EXPECT_NEAR(loss_fused, loss, 1e-6 * loss);
  for (size_t i = 0; i < d_fused.size(); ++i) EXPECT_NEAR(d_fused[i], d_unfused[i], 1e-7) << i;
  // Each row of the gradient sums to zero (softmax sums to one).
  for (int64_t n = 0; n < N; ++n) {
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += d_fused[n * C + c];
    EXPECT_NEAR(s, 0.0, 1e-7) << n;
  }
  // In place: dlogits == logits.
  auto inplace = x;
  EXPECT_EQ(softmax_xent_fused(inplace.data(), inplace.data(), y.data(), N, C, scale), loss_fused);
  EXPECT_EQ(inplace, d_fused);
}

TEST(SoftmaxXent, GradientMatchesFiniteDifferences) {
  const int64_t N = 4, C = 11;
  auto x = uniform_vector(N * C, 5, -3.0f, 3.0f);
  const auto y = random_labels(N, C, 6);
  const float scale = 0.25f;
  std::vector<float> d(N * C);
  softmax_xent_fused(d.data(), x.data(), y.data(), N, C, scale);
  expect_gradient(
      x, d, [&] { return scale * softmax_xent_forward(x.data(), y.data(), N, C, nullptr); }, 1e-2f, 1e-2, "dlogits");
}

TEST(SoftmaxXent, ManyClassesMatchDoubleReference) {
  const int64_t N = 2, C = 50257;
  const auto x = uniform_vector(N * C, 7, -10.0f, 10.0f);
  const auto y = random_labels(N, C, 8);
  std::vector<float> d(N * C);
  const double loss = softmax_xent_fused(d.data(), x.data(), y.data(), N, C, 1.0f);
  double ref = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const double l = lse_ref(&x[n * C], C);
    ref += l - x[n * C + y[n]];
    for (int64_t c = 0; c < C; c += 997) {
      const double p = std::exp(double(x[n * C + c]) - l) - (c == y[n] ? 1.0 : 0.0);
      EXPECT_NEAR(d[n * C + c], p, 2e-5 * std::fabs(p) + 1e-12) << n << "," << c;
    }
  }
  EXPECT_NEAR(loss, ref, 1e-6 * ref);
}

TEST(SoftmaxXent, StableForHugeLogits) {
  const int64_t N = 3, C = 8;
  for (float offset : {1e4f, -1e4f}) {
    auto x = uniform_vector(N * C, 9, -5.0f, 5.0f);
    for (float& v : x) v += offset;
    const auto y = random_labels(N, C, 10);
    std::vector<float> d(N * C), lse(N);
    const double loss = softmax_xent_fused(d.data(), x.data(), y.data(), N, C, 1.0f);
    double ref = 0.0;
    for (int64_t n = 0; n < N; ++n) ref += lse_ref(&x[n * C], C) - x[n * C + y[n]];
    ASSERT_TRUE(std::isfinite(loss));
    // The loss is computed relative to the row max, so even at 1e4 it keeps
    // the precision of the inputs' differences.
    EXPECT_NEAR(loss, ref, 1e-5 * ref) << "offset " << offset;
    for (float v : d) ASSERT_TRUE(std::isfinite(v));
    const double loss2 = softmax_xent_forward(x.data(), y.data(), N, C, lse.data());
    EXPECT_NEAR(loss2, ref, 1e-5 * ref);
    for (float v : lse) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(SoftmaxXent, ExtremeSpreadGivesZeroProbabilities) {
  // A logit 1e30 below the max must give probability 0 exactly, not NaN.
  std::vector<float> x = {0.0f, -1e30f, -std::numeric_limits<float>::infinity()};
  std::vector<int32_t> y = {0};
  std::vector<float> d(3);
  const double loss = softmax_xent_fused(d.data(), x.data(), y.data(), 1, 3, 1.0f);
  EXPECT_EQ(loss, 0.0);
  EXPECT_EQ(d, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

TEST(SoftmaxXent, CountCorrectTakesTheFirstMaximum) {
  const int64_t C = 4;
  const std::vector<float> x = {1,  3,  3,  0,    // tie between 1 and 2: arg-max 1
                                5,  5,  5,  5,    // all equal: arg-max 0
                                -1, -2, -3, 7,    // clear max 3
                                2,  1,  0,  -1};  // clear max 0
  EXPECT_EQ(count_correct(x.data(), std::vector<int32_t>{1, 0, 3, 0}.data(), 4, C), 4);
  EXPECT_EQ(count_correct(x.data(), std::vector<int32_t>{2, 1, 3, 1}.data(), 4, C), 1);
  EXPECT_EQ(count_correct(x.data(), std::vector<int32_t>{2, 3, 0, 1}.data(), 4, C), 0);
}

TEST(SoftmaxXent, OutOfRangeLabelIsAnErrorNamingRowAndLabel) {
  const int64_t N = 3, C = 10;
  const auto x = uniform_vector(N * C, 11);
  std::vector<float> d(N * C), lse(N, 0.0f);
  for (int32_t bad : {10, -1}) {
    const std::vector<int32_t> y = {0, 9, bad};
    const std::string expected_parts[] = {"row 2", "label " + std::to_string(bad), "[0, 10)"};
    auto expect_error = [&](auto&& call, const char* which) {
      try {
        call();
        ADD_FAILURE() << which << ": no error for label " << bad;
      } catch (const Error& e) {
        for (const auto& part : expected_parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(part)) << which;
      }
    };
    expect_error([&] { softmax_xent_forward(x.data(), y.data(), N, C, lse.data()); }, "forward");
    expect_error([&] { softmax_xent_backward(d.data(), x.data(), lse.data(), y.data(), N, C, 1.0f); }, "backward");
    expect_error([&] { softmax_xent_fused(d.data(), x.data(), y.data(), N, C, 1.0f); }, "fused");
    expect_error([&] { count_correct(x.data(), y.data(), N, C); }, "count_correct");
  }
}

}  // namespace
TEST(SoftmaxXent, RowLossesAreTheFusedKernelsRows) {
  const int64_t N = 37, C = 11;
  const float scale = 0.25f;
  const auto x = uniform_vector(N * C, 21, -4.0f, 4.0f);
  const auto y = random_labels(N, C, 22);
  std::vector<float> d_sum(N * C), d_rows(N * C), rows(N);
  const double sum = softmax_xent_fused(d_sum.data(), x.data(), y.data(), N, C, scale);
  softmax_xent_fused_rows(d_rows.data(), x.data(), y.data(), N, C, scale, rows.data());
  EXPECT_EQ(d_rows, d_sum);  // the same gradient, bit for bit
  double added = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const double one = softmax_xent_forward(&x[n * C], &y[n], 1, C, nullptr);
    EXPECT_EQ(rows[n], float(one)) << "row " << n;
    added += rows[n];
  }
  EXPECT_NEAR(added, sum, 1e-6 * sum);  // f32 rows: within their rounding
}

TEST(SoftmaxXent, CheckLabelsNamesTheFirstBadRowOfTheBatch) {
  const std::vector<int32_t> y = {0, 3, 1, 4, -1};
  EXPECT_NO_THROW(check_labels(y.data(), 3, 4));
  try {
    check_labels(y.data(), 5, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "softmax cross-entropy: row 3 has label 4, outside [0, 4)");
  }
  std::vector<float> x(5 * 4, 0.0f), d(5 * 4), rows(5);
  EXPECT_THROW(softmax_xent_fused_rows(d.data(), x.data(), y.data(), 5, 4, 1.0f, rows.data()), Error);
}

}  // namespace shardtrain::cpu
