#include "kernels/cpu/rmsnorm.h"

#include "kernels/cpu/elementwise.h"
#include "tests/unit/kernels_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

constexpr float kEps = 1e-5f;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Bit patterns: equal means identical, NaN and -0 included.
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<uint32_t>(v[i]);
  return out;
}

TEST(RmsNorm, ForwardMatchesDoubleReference) {
  const int64_t N = 5, C = 37;
  auto in = uniform_vector(N * C, 1, -2.0f, 2.0f);
  for (int64_t c = 0; c < C; ++c) in[3 * C + c] += 1000.0f;  // a row far from 0
  for (int64_t c = 0; c < C; ++c) in[4 * C + c] *= 1e-4f;    // a row where eps matters
  const auto w = uniform_vector(C, 2, 0.5f, 1.5f);
  std::vector<float> out(N * C, kNaN), rstd(N, kNaN);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), w.data(), N, C, kEps);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0.0;
    for (int64_t c = 0; c < C; ++c) ms += double(in[n * C + c]) * in[n * C + c];
    const double s = 1.0 / std::sqrt(ms / double(C) + kEps);
    EXPECT_NEAR(rstd[n], s, 1e-6 * s) << n;
    for (int64_t c = 0; c < C; ++c) {
      const double want = in[n * C + c] * s * w[c];
      EXPECT_NEAR(out[n * C + c], want, 1e-6 * std::fabs(want) + 1e-7) << n << "," << c;
    }
  }
}

TEST(RmsNorm, SameBitsOnEveryRun) {
  const int64_t N = 3, C = 1031;
  const auto in = uniform_vector(N * C, 3, -3.0f, 3.0f), w = uniform_vector(C, 4);
  std::vector<float> out1(N * C), rstd1(N), out2(N * C, kNaN), rstd2(N, kNaN);
  rmsnorm_forward(out1.data(), rstd1.data(), in.data(), w.data(), N, C, kEps);
  rmsnorm_forward(out2.data(), rstd2.data(), in.data(), w.data(), N, C, kEps);
  EXPECT_EQ(bits(out1), bits(out2));
  EXPECT_EQ(bits(rstd1), bits(rstd2));
}

// L = sum(out * R) + sum(in * D): with dresidual = D, din is dL/din.
TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 16;
  auto in = uniform_vector(N * C, 5, -2.0f, 2.0f), w = uniform_vector(C, 6, 0.5f, 1.5f);
  const auto R = uniform_vector(N * C, 7), D = uniform_vector(N * C, 8);
  std::vector<float> out(N * C), rstd(N);
  for (const bool with_residual : {false, true}) {
    auto loss = [&] {
      rmsnorm_forward(out.data(), rstd.data(), in.data(), w.data(), N, C, kEps);
      return dot(out, R) + (with_residual ? dot(in, D) : 0.0);
    };
    loss();
    std::vector<float> din(N * C, kNaN), dw(C, kNaN);
    rmsnorm_backward(din.data(), dw.data(), R.data(), in.data(), w.data(), rstd.data(),
                     with_residual ? D.data() : nullptr, N, C, false);
    const std::string what = with_residual ? " (with dresidual)" : "";
    expect_gradient(in, din, loss, 1e-3f, 1e-2, "din" + what);
    expect_gradient(w, dw, loss, 1e-2f, 1e-3, "dweight" + what);
  }
}

TEST(RmsNorm, AccumulateAddsAndOverwriteIgnoresGarbage) {
  const int64_t N = 5, C = 12;
  const auto in = uniform_vector(N * C, 9), w = uniform_vector(C, 10), dout = uniform_vector(N * C, 11);
  std::vector<float> out(N * C), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), w.data(), N, C, kEps);
  std::vector<float> din(N * C, kNaN), dw(C, kNaN);
  rmsnorm_backward(din.data(), dw.data(), dout.data(), in.data(), w.data(), rstd.data(), nullptr, N, C, false);
  for (float v : din) ASSERT_FALSE(std::isnan(v));
  for (float v : dw) ASSERT_FALSE(std::isnan(v));
  // dweight's rows in row order: the sum written out here gives the same bits.
  std::vector<float> want_dw(C, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) want_dw[c] += (in[n * C + c] * rstd[n]) * dout[n * C + c];
  EXPECT_EQ(bits(dw), bits(want_dw));
  auto dw2 = uniform_vector(C, 12);
  const auto dw0 = dw2;
  std::vector<float> din2(N * C, kNaN);
  rmsnorm_backward(din2.data(), dw2.data(), dout.data(), in.data(), w.data(), rstd.data(), nullptr, N, C, true);
  for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(dw2[c], dw0[c] + dw[c], 1e-5) << c;
  EXPECT_EQ(bits(din2), bits(din));  // din is always overwritten
}

// ---- the fused residual variants --------------------------------------------
//
// They must give exactly the bits of the unfused sequence they replace in a
// Llama block (add then rmsnorm_forward; the backward then add), over widths
// below, at and past lane_sum's 8 partial sums and a model's width.

struct RowsCols {
  int64_t N, C;
};
constexpr RowsCols kFusedShapes[] = {{1, 1}, {3, 7}, {2, 8}, {4, 37}, {5, 64}, {6, 100}, {4, 768}, {2, 1031}};

enum class Alias { none, first, second };
const char* alias_name(Alias a) { return a == Alias::none ? "separate" : a == Alias::first ? "first" : "second"; }

TEST(RmsNormResidual, ForwardIsAddThenRmsNormBitForBit) {
  for (const auto [N, C] : kFusedShapes) {
    const auto a = uniform_vector(N * C, 20 + N, -2.0f, 3.0f);
    auto b = uniform_vector(N * C, 30 + C);
    for (int64_t c = 0; c < C; ++c) b[c] += 1000.0f;  // row 0 far from 0
    const auto w = uniform_vector(C, 40, 0.5f, 1.5f);
    std::vector<float> want_sum(N * C), want_out(N * C), want_rstd(N);
    add(want_sum.data(), a.data(), b.data(), N * C);
    rmsnorm_forward(want_out.data(), want_rstd.data(), want_sum.data(), w.data(), N, C, kEps);
    for (const Alias alias : {Alias::none, Alias::first, Alias::second}) {
      const std::string what = fmt::format("N={} C={} sum={}", N, C, alias_name(alias));
      // In place, the sum starts as the operand it overwrites.
      std::vector<float> sum = alias == Alias::first ? a : alias == Alias::second ? b : std::vector<float>(N * C, kNaN);
      std::vector<float> out(N * C, kNaN), rstd(N, kNaN);
      const float* pa = alias == Alias::first ? sum.data() : a.data();
      const float* pb = alias == Alias::second ? sum.data() : b.data();
      residual_rmsnorm_forward(sum.data(), out.data(), rstd.data(), pa, pb, w.data(), N, C, kEps);
      EXPECT_EQ(bits(sum), bits(want_sum)) << what;
      EXPECT_EQ(bits(out), bits(want_out)) << what;
      EXPECT_EQ(bits(rstd), bits(want_rstd)) << what;
    }
  }
}

TEST(RmsNormResidual, BackwardWithResidualIsBackwardThenAddBitForBit) {
  for (const auto [N, C] : kFusedShapes) {
    const auto x = uniform_vector(N * C, 50 + N, -2.0f, 3.0f), w = uniform_vector(C, 51, 0.5f, 1.5f);
    const auto dout = uniform_vector(N * C, 53 + C), dres = uniform_vector(N * C, 54);
    std::vector<float> y(N * C), rstd(N);
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
    for (const bool accumulate : {false, true}) {
      const auto dw0 = accumulate ? uniform_vector(C, 55) : std::vector<float>(C, kNaN);
      std::vector<float> want_din(N * C, kNaN), want_dw = dw0;
      rmsnorm_backward(want_din.data(), want_dw.data(), dout.data(), x.data(), w.data(), rstd.data(), nullptr, N, C,
                       accumulate);
      add(want_din.data(), want_din.data(), dres.data(), N * C);
      for (const bool in_place : {false, true}) {
        const std::string what =
            fmt::format("N={} C={} accumulate={} din={}", N, C, accumulate, in_place ? "dresidual" : "separate");
        std::vector<float> din = in_place ? dres : std::vector<float>(N * C, kNaN);
        std::vector<float> dw = dw0;
        const float* residual = in_place ? din.data() : dres.data();
        rmsnorm_backward(din.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), residual, N, C,
                         accumulate);
        EXPECT_EQ(bits(din), bits(want_din)) << what;
        EXPECT_EQ(bits(dw), bits(want_dw)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace shardtrain::cpu
