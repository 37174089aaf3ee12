#include "kernels/cpu/linear.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"

#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

constexpr int64_t N = 5, IC = 7, OC = 4;

TEST(Linear, ForwardMatchesTripleLoop) {
  const auto in = uniform_vector(N * IC, 1), W = uniform_vector(OC * IC, 2);
  const auto b = uniform_vector(OC, 3);
  for (bool with_bias : {true, false}) {
    std::vector<float> out(N * OC, std::numeric_limits<float>::quiet_NaN());
    linear_forward(out.data(), in.data(), W.data(), with_bias ? b.data() : nullptr, N, IC, OC);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o) {
        double s = with_bias ? b[o] : 0.0;
        for (int64_t i = 0; i < IC; ++i) s += double(in[n * IC + i]) * W[o * IC + i];
        EXPECT_NEAR(out[n * OC + o], s, 1e-5) << n << "," << o << " bias " << with_bias;
      }
  }
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  auto in = uniform_vector(N * IC, 4), W = uniform_vector(OC * IC, 5), b = uniform_vector(OC, 6);
  const auto R = uniform_vector(N * OC, 7);  // L = sum(out * R), so dL/dout = R
  std::vector<float> out(N * OC);
  auto loss = [&] {
    linear_forward(out.data(), in.data(), W.data(), b.data(), N, IC, OC);
    return dot(out, R);
  };
  std::vector<float> din(N * IC), dW(OC * IC), db(OC);
  linear_backward(din.data(), dW.data(), db.data(), R.data(), in.data(), W.data(), N, IC, OC, false);
  expect_gradient(in, din, loss, 1e-2f, 1e-3, "din");
  expect_gradient(W, dW, loss, 1e-2f, 1e-3, "dW");
  expect_gradient(b, db, loss, 1e-2f, 1e-3, "db");
}

TEST(Linear, AccumulateAddsAndOverwriteIgnoresGarbage) {
  const auto in = uniform_vector(N * IC, 8), W = uniform_vector(OC * IC, 9);
  const auto dout = uniform_vector(N * OC, 10);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Reference gradients, written over NaN garbage (accumulate = false).
  std::vector<float> din(N * IC, nan), dW(OC * IC, nan), db(OC, nan);
  linear_backward(din.data(), dW.data(), db.data(), dout.data(), in.data(), W.data(), N, IC, OC, false);
  for (float v : dW) ASSERT_FALSE(std::isnan(v));
  for (float v : db) ASSERT_FALSE(std::isnan(v));
  for (float v : din) ASSERT_FALSE(std::isnan(v));
  // accumulate = true adds onto what is there (din is still overwritten).
  std::vector<float> din2(N * IC, nan), dW2 = uniform_vector(OC * IC, 11), db2 = uniform_vector(OC, 12);
  const auto dW0 = dW2, db0 = db2;
  linear_backward(din2.data(), dW2.data(), db2.data(), dout.data(), in.data(), W.data(), N, IC, OC, true);
  for (size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW2[i], dW0[i] + dW[i], 1e-5) << i;
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db2[i], db0[i] + db[i], 1e-5) << i;
  EXPECT_EQ(din2, din);
}

TEST(Linear, OptionalGradientsMayBeNull) {
  const auto in = uniform_vector(N * IC, 13), W = uniform_vector(OC * IC, 14);
  const auto dout = uniform_vector(N * OC, 15);
  std::vector<float> dW(OC * IC), dW_ref(OC * IC), din(N * IC), db(OC);
  linear_backward(nullptr, dW.data(), nullptr, dout.data(), in.data(), W.data(), N, IC, OC, false);
  linear_backward(din.data(), dW_ref.data(), db.data(), dout.data(), in.data(), W.data(), N, IC, OC, false);
  EXPECT_EQ(dW, dW_ref);
}

TEST(Linear, RepeatedRunsAreBitwiseIdentical) {
  const int64_t n = 64, ic = 300, oc = 200;  // large enough for OpenBLAS's blocked paths
  const auto in = uniform_vector(n * ic, 17), W = uniform_vector(oc * ic, 18);
  const auto b = uniform_vector(oc, 19), dout = uniform_vector(n * oc, 20);
  std::vector<float> out[2], din[2], dW[2], db[2];
  for (int run = 0; run < 2; ++run) {
    out[run].resize(n * oc), din[run].resize(n * ic), dW[run].resize(oc * ic), db[run].resize(oc);
    linear_forward(out[run].data(), in.data(), W.data(), b.data(), n, ic, oc);
    linear_backward(din[run].data(), dW[run].data(), db[run].data(), dout.data(), in.data(), W.data(), n, ic, oc,
                    false);
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(din[0], din[1]);
  EXPECT_EQ(dW[0], dW[1]);
  EXPECT_EQ(db[0], db[1]);
}

TEST(Linear, EmptyBatchOverwritesWithZeros) {
  const auto W = uniform_vector(OC * IC, 16);
  std::vector<float> dW(OC * IC, 3.0f), db(OC, 3.0f);
  linear_backward(nullptr, dW.data(), db.data(), nullptr, nullptr, W.data(), 0, IC, OC, false);
  EXPECT_EQ(dW, std::vector<float>(OC * IC, 0.0f));
  EXPECT_EQ(db, std::vector<float>(OC, 0.0f));
}

}  // namespace
}  // namespace shardtrain::cpu

namespace shardtrain::cpu {
namespace {

// The bf16-operand forms give the f32 forms' results bit for bit in bf16
// precision: the operands are the same rounded values, the products the
// same kernel. Where the CPU has no bf16 kernel there is nothing to compare.
TEST(Linear, Bf16OperandFormsMatchTheF32FormsInBf16Precision) {
  const testing::ScopedBf16Products bf16_products;
  if (!bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  const int64_t rows = 37, ic = 53, oc = 29;  // odd sizes: the kernels' tails
  const auto x = uniform_vector(rows * ic, 1), w = uniform_vector(oc * ic, 2), b = uniform_vector(oc, 3);
  const auto g = uniform_vector(rows * oc, 4);
  std::vector<bf16> x16(x.size()), w16(w.size()), g16(g.size());
  f32_to_bf16(x16.data(), x.data(), int64_t(x.size()));
  f32_to_bf16(w16.data(), w.data(), int64_t(w.size()));
  f32_to_bf16(g16.data(), g.data(), int64_t(g.size()));

  std::vector<float> y(rows * oc), y16(rows * oc);
  linear_forward(y.data(), x.data(), w.data(), b.data(), rows, ic, oc);
  linear_forward_bf16(y16.data(), x16.data(), w16.data(), b.data(), rows, ic, oc);
  EXPECT_EQ(y, y16);

  for (bool accumulate : {false, true}) {
    std::vector<float> dx(rows * ic), dw(oc * ic, 0.5f), db(oc, 0.25f);
    std::vector<float> dx16(rows * ic), dw16(oc * ic, 0.5f), db16(oc, 0.25f);
    linear_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), rows, ic, oc, accumulate);
    linear_backward_bf16(dx16.data(), dw16.data(), g16.data(), x16.data(), w16.data(), rows, ic, oc, accumulate);
    bias_gradient(db16.data(), g.data(), rows, oc, accumulate);
    EXPECT_EQ(dx, dx16) << "accumulate " << accumulate;
    EXPECT_EQ(dw, dw16) << "accumulate " << accumulate;
    EXPECT_EQ(db, db16) << "accumulate " << accumulate;
  }
  // The bias gradient of a bf16 output gradient sums its values as f32.
  std::vector<float> g_rounded(g.size()), db_f32(oc), db_b16(oc);
  bf16_to_f32(g_rounded.data(), g16.data(), int64_t(g16.size()));
  bias_gradient(db_f32.data(), g_rounded.data(), rows, oc, false);
  bias_gradient(db_b16.data(), g16.data(), rows, oc, false);
  EXPECT_EQ(db_f32, db_b16);
}

}  // namespace
}  // namespace shardtrain::cpu
