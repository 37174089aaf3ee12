#include "kernels/cpu/attention.h"

#include "runtime/core/error.h"
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

// The definition, in double, one (b, h, t) at a time: no GEMM, no mask trick.
std::vector<double> naive_attention(const std::vector<float>& qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t hs = C / NH;
  std::vector<double> out(size_t(B * T * C), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        auto at = [&](int64_t pos, int64_t part, int64_t i) {
          return double(qkv[size_t((b * T + pos) * 3 * C + part * C + h * hs + i)]);
        };
        std::vector<double> w(size_t(t + 1));
        double maxv = -1e300, sum = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0.0;
          for (int64_t i = 0; i < hs; ++i) s += at(t, 0, i) * at(j, 1, i);
          w[size_t(j)] = s / std::sqrt(double(hs));
          maxv = std::max(maxv, w[size_t(j)]);
        }
        for (double& x : w) sum += (x = std::exp(x - maxv));
        for (int64_t i = 0; i < hs; ++i) {
          double o = 0.0;
          for (int64_t j = 0; j <= t; ++j) o += w[size_t(j)] / sum * at(j, 2, i);
          out[size_t((b * T + t) * C + h * hs + i)] = o;
        }
      }
  return out;
}

TEST(Attention, ForwardMatchesNaiveReference) {
  const int64_t B = 2, T = 7, C = 12, NH = 3;
  const auto qkv = uniform_vector(size_t(B * T * 3 * C), 1, -2.0f, 2.0f);
  std::vector<float> out(size_t(B * T * C)), att(size_t(B * NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  const auto ref = naive_attention(qkv, B, T, C, NH);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-5) << i;
  // Each probability row sums to 1 over j <= t and is 0 beyond.
  for (int64_t r = 0; r < B * NH * T; ++r) {
    const int64_t t = r % T;
    double sum = 0.0;
    for (int64_t j = 0; j < T; ++j) {
      const float p = att[size_t(r * T + j)];
      if (j > t) {
        EXPECT_EQ(p, 0.0f) << r << "," << j;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << r;
  }
}

TEST(Attention, OutputAtTDoesNotDependOnLaterPositions) {
  const int64_t B = 2, T = 6, C = 8, NH = 2;
  const auto qkv = uniform_vector(size_t(B * T * 3 * C), 2);
  std::vector<float> out(size_t(B * T * C)), att(size_t(B * NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int64_t later = 1; later < T; ++later) {
    auto changed = qkv;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < 3 * C; ++c) changed[size_t((b * T + later) * 3 * C + c)] += 5.0f;
    std::vector<float> out2(out.size());
    attention_forward(out2.data(), att.data(), changed.data(), B, T, C, NH);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        bool same = true;
        for (int64_t c = 0; c < C; ++c)
          same = same && out2[size_t((b * T + t) * C + c)] == out[size_t((b * T + t) * C + c)];
        if (t < later)
          EXPECT_TRUE(same) << "position " << t << " changed with position " << later;
        else
          EXPECT_FALSE(same) << "position " << t << " ignored position " << later;
      }
  }
}

TEST(Attention, LargeScoresStayFinite) {
  const int64_t B = 1, T = 5, C = 4, NH = 1;
  auto qkv = uniform_vector(size_t(B * T * 3 * C), 3, -1.0f, 1.0f);
  for (float& x : qkv) x *= 300.0f;  // scores ~1e5: exp would overflow without the max
  std::vector<float> out(size_t(B * T * C)), att(size_t(B * NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  for (float x : att) ASSERT_TRUE(std::isfinite(x));
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, T = 5, C = 8, NH = 2;
  auto qkv = uniform_vector(size_t(B * T * 3 * C), 4, -1.5f, 1.5f);
  const auto R = uniform_vector(size_t(B * T * C), 5);
  std::vector<float> out(size_t(B * T * C)), att(size_t(B * NH * T * T));
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  loss();
  // Garbage in dqkv and scratch: backward must overwrite both completely.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dqkv(qkv.size(), nan), scratch(size_t(T * T), nan);
  attention_backward(dqkv.data(), scratch.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  for (float g : dqkv) ASSERT_TRUE(std::isfinite(g));
  expect_gradient(qkv, dqkv, loss, 1e-3f, 1e-2, "dqkv");
}

TEST(Attention, HeadsMustDivideChannels) {
  std::vector<float> qkv(3 * 10), out(10), att(1);
  EXPECT_THROW(attention_forward(out.data(), att.data(), qkv.data(), 1, 1, 10, 3), Error);
}

}  // namespace
}  // namespace shardtrain::cpu
