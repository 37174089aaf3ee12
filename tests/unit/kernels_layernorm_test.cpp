#include "kernels/cpu/layernorm.h"

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

// ---- the fused residual variants --------------------------------------------
//
// They must give exactly the bits of the unfused sequence they replace in a
// transformer block (add then layernorm_forward; layernorm_backward then add),
// so a model's training results do not move: compared as bit patterns, over
// widths below, at and past the 8 partial sums of lane_sum and a GPT width.

// Bit patterns: equal means identical, NaN and -0 included.
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<uint32_t>(v[i]);
  return out;
}

struct RowsCols {
  int64_t N, C;
};
constexpr RowsCols kFusedShapes[] = {{1, 1}, {3, 7}, {2, 8}, {4, 37}, {5, 64}, {6, 100}, {4, 768}, {2, 1031}};

// Where the fused op writes its sum (forward) or input gradient (backward).
enum class Alias { none, first, second };
const char* alias_name(Alias a) { return a == Alias::none ? "separate" : a == Alias::first ? "first" : "second"; }

TEST(LayerNormResidual, ForwardIsAddThenLayerNormBitForBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto [N, C] : kFusedShapes) {
    const auto a = uniform_vector(N * C, 20 + N, -2.0f, 3.0f);
    auto b = uniform_vector(N * C, 30 + C);
    for (int64_t c = 0; c < C; ++c) b[c] += 1000.0f;  // row 0: |mean| >> std
    const auto w = uniform_vector(C, 40, 0.5f, 1.5f), bias = uniform_vector(C, 41);
    // The unfused sequence of TransformerBlock::forward before the fusion.
    std::vector<float> want_sum(N * C), want_out(N * C), want_mean(N), want_rstd(N);
    add(want_sum.data(), a.data(), b.data(), N * C);
    layernorm_forward(want_out.data(), want_mean.data(), want_rstd.data(), want_sum.data(), w.data(), bias.data(), N, C,
                      kEps);
    for (const Alias alias : {Alias::none, Alias::first, Alias::second}) {
      const std::string what = fmt::format("N={} C={} sum={}", N, C, alias_name(alias));
      // In place, the sum starts as the operand it overwrites.
      std::vector<float> sum = alias == Alias::first ? a : alias == Alias::second ? b : std::vector<float>(N * C, nan);
      std::vector<float> out(N * C, nan), mean(N, nan), rstd(N, nan);
      const float* pa = alias == Alias::first ? sum.data() : a.data();
      const float* pb = alias == Alias::second ? sum.data() : b.data();
      residual_layernorm_forward(sum.data(), out.data(), mean.data(), rstd.data(), pa, pb, w.data(), bias.data(), N, C,
                                 kEps);
      EXPECT_EQ(bits(sum), bits(want_sum)) << what;
      EXPECT_EQ(bits(out), bits(want_out)) << what;
      EXPECT_EQ(bits(mean), bits(want_mean)) << what;
      EXPECT_EQ(bits(rstd), bits(want_rstd)) << what;
    }
  }
}

TEST(LayerNormResidual, BackwardAddIsLayerNormBackwardThenAddBitForBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto [N, C] : kFusedShapes) {
    const auto x = uniform_vector(N * C, 50 + N, -2.0f, 3.0f), w = uniform_vector(C, 51, 0.5f, 1.5f);
    const auto bias = uniform_vector(C, 52), dout = uniform_vector(N * C, 53 + C), dres = uniform_vector(N * C, 54);
    std::vector<float> y(N * C), mean(N), rstd(N);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C, kEps);
    for (const bool accumulate : {false, true}) {
      // Accumulating adds onto earlier gradients; overwriting must ignore garbage.
      const auto dw0 = accumulate ? uniform_vector(C, 55) : std::vector<float>(C, nan);
      const auto db0 = accumulate ? uniform_vector(C, 56) : std::vector<float>(C, nan);
      // The unfused sequence of TransformerBlock::backward before the fusion.
      std::vector<float> want_din(N * C, nan), want_dw = dw0, want_db = db0;
      layernorm_backward(want_din.data(), want_dw.data(), want_db.data(), dout.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C, accumulate);
      add(want_din.data(), want_din.data(), dres.data(), N * C);
      for (const Alias alias : {Alias::none, Alias::first}) {
        const std::string what =
            fmt::format("N={} C={} accumulate={} din={}", N, C, accumulate, alias == Alias::none ? "separate" : "dres");
        std::vector<float> din = alias == Alias::first ? dres : std::vector<float>(N * C, nan);
        std::vector<float> dw = dw0, db = db0;
        const float* residual = alias == Alias::first ? din.data() : dres.data();
        layernorm_backward_add(din.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                               rstd.data(), residual, N, C, accumulate);
        EXPECT_EQ(bits(din), bits(want_din)) << what;
        EXPECT_EQ(bits(dw), bits(want_dw)) << what;
        EXPECT_EQ(bits(db), bits(want_db)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace shardtrain::cpu
