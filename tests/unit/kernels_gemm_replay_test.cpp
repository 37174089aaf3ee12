// GemmReplay lays the replayed products out as the recorded step did:
// calls that shared a matrix share a buffer, views into one tensor are one
// buffer at the step's offsets, and data flows from call to call as in the
// step.
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_replay.h"

#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace shardtrain::cpu {
namespace {

// C[M,N] = A[M,K] B[K,N], dense and row-major, in double.
std::vector<double> reference(const float* A, const float* B, int64_t M, int64_t N, int64_t K) {
  std::vector<double> C(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) C[size_t(i * N + j)] += double(A[i * K + k]) * double(B[k * N + j]);
  return C;
}

TEST(GemmReplay, SharesTheStepsMatricesAndItsDataFlow) {
  // A two-layer forward, h = x W1 then y = h W2, recorded on real buffers.
  std::vector<float> x(4 * 8, 0.5f), w1(8 * 6, 0.25f), h(4 * 6), w2(6 * 5, -0.5f), y(4 * 5);
  std::vector<GemmCall> calls;
  {
    GemmRecorder recorder;
    gemm(false, false, 4, 6, 8, 1.0f, x.data(), 8, w1.data(), 6, 0.0f, h.data(), 6);
    gemm(false, false, 4, 5, 6, 1.0f, h.data(), 6, w2.data(), 5, 0.0f, y.data(), 5);
    calls = recorder.calls();
  }
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].a, h.data());
  GemmReplay replay(calls);
  EXPECT_EQ(replay.buffers(), 5u);  // x, W1, h, W2, y: h written once and read once
  EXPECT_EQ(replay.bytes(), int64_t(sizeof(float)) * (4 * 8 + 8 * 6 + 4 * 6 + 6 * 5 + 4 * 5));
  replay.run();
  // The second call read what the first wrote in the replay's own memory.
  const std::vector<double> expect_h = reference(replay.at(x.data()), replay.at(w1.data()), 4, 6, 8);
  const std::vector<double> expect_y = reference(replay.at(h.data()), replay.at(w2.data()), 4, 5, 6);
  for (size_t i = 0; i < expect_h.size(); ++i) EXPECT_NEAR(replay.at(h.data())[i], expect_h[i], 1e-4);
  for (size_t i = 0; i < expect_y.size(); ++i) EXPECT_NEAR(replay.at(y.data())[i], expect_y[i], 1e-4);
  EXPECT_NE(replay.at(h.data()), h.data());  // its own memory, not the step's
}

TEST(GemmReplay, ViewsIntoOneTensorAreOneBufferAtTheStepsOffsets) {
  // Two heads of a [4 x 12] tensor (columns 0-5 and 6-11, row stride 12),
  // each times one [6 x 3] weight, written into one [4 x 6] output.
  std::vector<float> t(4 * 12, 1.0f), w(6 * 3, 1.0f), out(4 * 6);
  std::vector<GemmCall> calls;
  {
    GemmRecorder recorder;
    gemm(false, false, 4, 3, 6, 1.0f, t.data(), 12, w.data(), 3, 0.0f, out.data(), 6);
    gemm(false, false, 4, 3, 6, 1.0f, t.data() + 6, 12, w.data(), 3, 0.0f, out.data() + 3, 6);
    calls = recorder.calls();
  }
  GemmReplay replay(calls);
  EXPECT_EQ(replay.buffers(), 3u);  // t, w, out: each pair of views is one stretch
  EXPECT_EQ(replay.bytes(), int64_t(sizeof(float)) * (4 * 12 + 6 * 3 + 4 * 6));
  EXPECT_EQ(replay.at(t.data() + 6), replay.at(t.data()) + 6);
  EXPECT_EQ(replay.at(out.data() + 3), replay.at(out.data()) + 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(replay.at(t.data())) % 64, 0u);
}

TEST(GemmReplay, KeepsTheStepsAlphaAndBeta) {
  // C = 2 A B + C: run twice, C grows by 2 A B each time.
  std::vector<float> a(2 * 3, 1.0f), b(3 * 2, 1.0f), c(2 * 2, 0.0f);
  std::vector<GemmCall> calls;
  {
    GemmRecorder recorder;
    gemm(false, false, 2, 2, 3, 2.0f, a.data(), 3, b.data(), 2, 1.0f, c.data(), 2);
    calls = recorder.calls();
  }
  GemmReplay replay(calls);
  const std::vector<double> ab = reference(replay.at(a.data()), replay.at(b.data()), 2, 2, 3);
  std::vector<float> before(replay.at(c.data()), replay.at(c.data()) + 4);
  replay.run();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(replay.at(c.data())[i], before[i] + 2.0 * ab[i], 1e-5);
}

TEST(GemmReplay, ReplaysABf16ProductsBias) {
  const testing::ScopedBf16Products bf16_products;
  const testing::ScopedCpuBackend onednn(CpuBackend::onednn);
  if (!bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  std::vector<bf16> a(4 * 8, to_bf16(0.5f)), b(3 * 8, to_bf16(0.25f));
  const std::vector<float> bias = {1.0f, 2.0f, 3.0f};
  std::vector<float> c(4 * 3);
  std::vector<GemmCall> calls;
  {
    GemmRecorder recorder;
    gemm_bf16_bias(false, true, 4, 3, 8, a.data(), 8, b.data(), 8, bias.data(), c.data(), 3);
    calls = recorder.calls();
  }
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].bf16_operands);
  EXPECT_EQ(calls[0].bias, bias.data());
  GemmReplay replay(calls);
  replay.run();
  // On the replay's own operands and bias: each row the product plus the bias.
  const bf16 *ra = replay.at(a.data()), *rb = replay.at(b.data());
  const float* rbias = replay.at(bias.data());
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double want = rbias[j];
      for (int64_t k = 0; k < 8; ++k) want += double(to_f32(ra[i * 8 + k])) * double(to_f32(rb[j * 8 + k]));
      EXPECT_NEAR(replay.at(c.data())[i * 3 + j], want, 1e-4 * (1 + std::fabs(want))) << i << " " << j;
    }
}

TEST(GemmReplay, ReplaysBf16OperandsAsBf16) {
  const testing::ScopedBf16Products bf16_products;
  if (!bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  std::vector<bf16> a(4 * 8, to_bf16(0.5f)), b(8 * 3, to_bf16(0.25f));
  std::vector<float> c(4 * 3);
  std::vector<GemmCall> calls;
  {
    GemmRecorder recorder;
    gemm_bf16(false, false, 4, 3, 8, 1.0f, a.data(), 8, b.data(), 3, 0.0f, c.data(), 3);
    calls = recorder.calls();
  }
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].bf16_operands);
  GemmReplay replay(calls);
  EXPECT_EQ(replay.bytes(), int64_t(sizeof(bf16)) * (4 * 8 + 8 * 3) + int64_t(sizeof(float)) * 4 * 3);
  replay.run();
  const bf16* ra = replay.at(a.data());
  const bf16* rb = replay.at(b.data());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      double want = 0;
      for (int k = 0; k < 8; ++k) want += double(to_f32(ra[i * 8 + k])) * double(to_f32(rb[k * 3 + j]));
      EXPECT_NEAR(replay.at(c.data())[i * 3 + j], want, 1e-4);
    }
}

// A batched call (gemm_batched) replays as one: its operands' buffers span
// every product of the batch, and the replay computes each of them.
TEST(GemmReplay, ReplaysABatchAsOneCall) {
  const int64_t count = 3, M = 4, N = 5, K = 6;
  std::vector<float> a(count * M * K, 0.5f), b(count * K * N, 0.25f), c(count * M * N);
  std::vector<GemmCall> calls;
  {
    GemmRecorder recorder;
    gemm_batched(count, false, false, M, N, K, 1.0f, a.data(), K, M * K, b.data(), N, K * N, 0.0f, c.data(), N, M * N);
    calls = recorder.calls();
  }
  ASSERT_EQ(calls.size(), 1u);
  GemmReplay replay(calls);
  EXPECT_EQ(replay.buffers(), 3u);
  EXPECT_EQ(replay.bytes(), int64_t(sizeof(float)) * count * (M * K + K * N + M * N));
  replay.run();
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<double> expect =
        reference(replay.at(a.data()) + i * M * K, replay.at(b.data()) + i * K * N, M, N, K);
    for (int64_t j = 0; j < M * N; ++j) EXPECT_NEAR(replay.at(c.data())[i * M * N + j], expect[size_t(j)], 1e-4);
  }
}

}  // namespace
}  // namespace shardtrain::cpu
