#include "kernels/cpu/flash_attention.h"

#include "kernels/cpu/attention.h"
#include "kernels/cpu/one_tile_attention.h"
#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::error_of;
using testing::expect_gradient;
using testing::uniform_vector;

struct Shape {
  int64_t B, T, H, KV, hs;
  int64_t C3() const { return (H + 2 * KV) * hs; }
  size_t qkv_size() const { return size_t(B * T * C3()); }
  size_t out_size() const { return size_t(B * T * H * hs); }
  size_t lse_size() const { return size_t(B * H * T); }
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B=" << s.B << " T=" << s.T << " H=" << s.H << " KV=" << s.KV << " hs=" << s.hs;
}

// Sequence lengths: below one tile, a few tiles and not a multiple of any
// power-of-two tile, and exactly two tiles of 64 (one of 128); exactly one
// tile and one row more (T up to one tile runs one_tile_attention.h's kernel).
constexpr int64_t kShortT = 7, kLongT = 203, kEvenT = 128, kTileT = 64;
// Sequences of T = kTileT (H 4, KV 2, hs 8) that one_tile_attention takes in
// more than one chunk, the last one shorter.
constexpr int64_t kChunkedB = 7;

struct Reference {
  std::vector<double> out, lse;
};

// The definition, in double, one (b, h, t) at a time, with query head h
// reading key/value head h / (H / KV).
Reference naive_attention(const std::vector<float>& qkv, const Shape& s) {
  const int64_t group = s.H / s.KV;
  Reference ref{std::vector<double>(s.out_size()), std::vector<double>(s.lse_size())};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        auto at = [&](int64_t pos, int64_t col) { return double(qkv[size_t((b * s.T + pos) * s.C3() + col)]); };
        const int64_t qc = h * s.hs, kc = (s.H + h / group) * s.hs, vc = (s.H + s.KV + h / group) * s.hs;
        std::vector<double> w(size_t(t + 1));
        double maxv = -1e300, sum = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0.0;
          for (int64_t i = 0; i < s.hs; ++i) d += at(t, qc + i) * at(j, kc + i);
          w[size_t(j)] = d / std::sqrt(double(s.hs));
          maxv = std::max(maxv, w[size_t(j)]);
        }
        for (double& x : w) sum += (x = std::exp(x - maxv));
        ref.lse[size_t((b * s.H + h) * s.T + t)] = maxv + std::log(sum);
        for (int64_t i = 0; i < s.hs; ++i) {
          double o = 0.0;
          for (int64_t j = 0; j <= t; ++j) o += w[size_t(j)] / sum * at(j, vc + i);
          ref.out[size_t((b * s.T + t) * s.H * s.hs + h * s.hs + i)] = o;
        }
      }
  return ref;
}

struct Forward {
  std::vector<float> out, lse;
};

Forward forward(const std::vector<float>& qkv, const Shape& s) {
  Forward f{std::vector<float>(s.out_size()), std::vector<float>(s.lse_size())};
  flash_attention_forward(f.out.data(), f.lse.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.hs);
  return f;
}

std::vector<float> backward(const std::vector<float>& dout, const std::vector<float>& qkv, const Forward& f,
                            const Shape& s) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dqkv(s.qkv_size(), nan), scratch(size_t(flash_attention_scratch_floats(s.T, s.hs)), nan);
  flash_attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), f.out.data(), f.lse.data(), s.B, s.T,
                           s.H, s.KV, s.hs);
  return dqkv;
}

// The same inputs in the materialized kernel's layout with every key/value
// head repeated for each query head of its group (KV == H).
std::vector<float> expand_kv(const std::vector<float>& qkv, const Shape& s) {
  const int64_t group = s.H / s.KV, C = s.H * s.hs;
  std::vector<float> wide(size_t(s.B * s.T * 3 * C));
  for (int64_t row = 0; row < s.B * s.T; ++row) {
    const float* src = qkv.data() + row * s.C3();
    float* dst = wide.data() + row * 3 * C;
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.hs; ++i) {
        dst[h * s.hs + i] = src[h * s.hs + i];
        dst[C + h * s.hs + i] = src[(s.H + h / group) * s.hs + i];
        dst[2 * C + h * s.hs + i] = src[(s.H + s.KV + h / group) * s.hs + i];
      }
  }
  return wide;
}

// The adjoint of expand_kv: the repeated heads' gradients summed back onto
// their key/value head.
std::vector<float> reduce_kv(const std::vector<float>& wide, const Shape& s) {
  const int64_t group = s.H / s.KV, C = s.H * s.hs;
  std::vector<float> grad(s.qkv_size(), 0.0f);
  for (int64_t row = 0; row < s.B * s.T; ++row) {
    const float* src = wide.data() + row * 3 * C;
    float* dst = grad.data() + row * s.C3();
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.hs; ++i) {
        dst[h * s.hs + i] = src[h * s.hs + i];
        dst[(s.H + h / group) * s.hs + i] += src[C + h * s.hs + i];
        dst[(s.H + s.KV + h / group) * s.hs + i] += src[2 * C + h * s.hs + i];
      }
  }
  return grad;
}

class FlashAttentionShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(FlashAttentionShapes, ForwardMatchesNaiveReference) {
  const Shape s = GetParam();
  const auto qkv = uniform_vector(s.qkv_size(), 1, -2.0f, 2.0f);
  const auto f = forward(qkv, s);
  const auto ref = naive_attention(qkv, s);
  for (size_t i = 0; i < f.out.size(); ++i) ASSERT_NEAR(f.out[i], ref.out[i], 1e-5) << "out " << i;
  for (size_t i = 0; i < f.lse.size(); ++i) ASSERT_NEAR(f.lse[i], ref.lse[i], 1e-5 * (1.0 + std::fabs(ref.lse[i])));
}

// Against the materialized kernel run on the key/value heads repeated (the
// definition of grouped-query attention), forward and backward, on both
// CPU backends.
TEST_P(FlashAttentionShapes, MatchesMaterializedAttention) {
  const Shape s = GetParam();
  const int64_t C = s.H * s.hs;
  const auto qkv = uniform_vector(s.qkv_size(), 2, -2.0f, 2.0f);
  const auto dout = uniform_vector(s.out_size(), 3);
  const auto wide = expand_kv(qkv, s);
  std::vector<float> out(s.out_size()), att(size_t(s.B * s.H * s.T * s.T)), dwide(wide.size());
  std::vector<float> scratch(size_t(s.T * s.T));
  attention_forward(out.data(), att.data(), wide.data(), s.B, s.T, C, s.H);
  attention_backward(dwide.data(), scratch.data(), dout.data(), wide.data(), att.data(), s.B, s.T, C, s.H);
  const auto expected = reduce_kv(dwide, s);

  // The tiles' products (or the batched ones) on each backend.
  for (const cpu::CpuBackend backend : testing::kCpuBackends) {
    const testing::ScopedCpuBackend scoped(backend);
    const auto f = forward(qkv, s);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(f.out[i], out[i], 1e-5) << name_of(backend) << " out " << i;
    const auto dqkv = backward(dout, qkv, f, s);
    for (size_t i = 0; i < dqkv.size(); ++i)
      ASSERT_NEAR(dqkv[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i]))) << name_of(backend) << " dqkv " << i;
  }
}

TEST_P(FlashAttentionShapes, BackwardWritesEveryElement) {
  const Shape s = GetParam();
  const auto qkv = uniform_vector(s.qkv_size(), 4);
  const auto dout = uniform_vector(s.out_size(), 5);
  const auto dqkv = backward(dout, qkv, forward(qkv, s), s);  // NaN-filled before
  for (size_t i = 0; i < dqkv.size(); ++i) ASSERT_TRUE(std::isfinite(dqkv[i])) << i;
}

TEST_P(FlashAttentionShapes, SameBitsEveryCall) {
  const Shape s = GetParam();
  const auto qkv = uniform_vector(s.qkv_size(), 6, -3.0f, 3.0f);
  const auto dout = uniform_vector(s.out_size(), 7);
  const auto f1 = forward(qkv, s), f2 = forward(qkv, s);
  EXPECT_EQ(std::memcmp(f1.out.data(), f2.out.data(), f1.out.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(f1.lse.data(), f2.lse.data(), f1.lse.size() * sizeof(float)), 0);
  const auto d1 = backward(dout, qkv, f1, s), d2 = backward(dout, qkv, f2, s);
  EXPECT_EQ(std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)), 0);
}

// {B, T, H, KV, hs}: grouped (KV = 2 and 1 for 4 query heads) and plain
// multi-head (KV == H), each below one tile, over several tiles and at an
// exact multiple of the tile; one whole tile, over several chunks of
// sequences, and one row past it; the reference GPT's heads.
INSTANTIATE_TEST_SUITE_P(Kernels, FlashAttentionShapes,
                         ::testing::Values(Shape{2, kShortT, 4, 2, 8}, Shape{2, kShortT, 4, 1, 8},
                                           Shape{2, kShortT, 4, 4, 8}, Shape{1, kLongT, 4, 2, 16},
                                           Shape{1, kLongT, 4, 1, 16}, Shape{1, kLongT, 4, 4, 16},
                                           Shape{2, kEvenT, 4, 2, 8}, Shape{1, kEvenT, 2, 2, 64},
                                           Shape{kChunkedB, kTileT, 4, 2, 8}, Shape{1, kTileT + 1, 4, 2, 8},
                                           Shape{2, kTileT, 4, 4, 32}),
                         [](const ::testing::TestParamInfo<Shape>& param) {
                           const Shape& s = param.param;
                           return fmt::format("B{}_T{}_H{}_KV{}_hs{}", s.B, s.T, s.H, s.KV, s.hs);
                         });

// Changing position `later` changes exactly the outputs at t >= later.
void expect_causal(const Shape& s, std::initializer_list<int64_t> positions) {
  const auto qkv = uniform_vector(s.qkv_size(), 8);
  const auto base = forward(qkv, s);
  for (int64_t later : positions) {
    auto changed = qkv;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t c = 0; c < s.C3(); ++c) changed[size_t((b * s.T + later) * s.C3() + c)] += 5.0f;
    const auto f = forward(changed, s);
    const int64_t HC = s.H * s.hs;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t t = 0; t < s.T; ++t) {
        const size_t at = size_t((b * s.T + t) * HC);
        const bool same = std::memcmp(f.out.data() + at, base.out.data() + at, size_t(HC) * sizeof(float)) == 0;
        if (t < later)
          ASSERT_TRUE(same) << "T " << s.T << ": position " << t << " changed with position " << later;
        else
          ASSERT_FALSE(same) << "T " << s.T << ": position " << t << " ignored position " << later;
      }
  }
}

// Positions at tile edges and inside tiles, for any power-of-two tile up to
// 128; within one tile, at the edges of the 16-key blocks its rows compute.
TEST(FlashAttention, OutputAtTDoesNotDependOnLaterPositions) {
  expect_causal({2, kLongT, 4, 2, 8}, {1, 5, 63, 64, 65, 127, 128, 129, 200, 202});
  expect_causal({2, kTileT, 4, 2, 8}, {1, 5, 15, 16, 17, 31, 32, 33, 48, 62, 63});
}

TEST(FlashAttention, OneTileChunksOfSequencesLeaveARemainder) {
  const int64_t chunk = one_tile_attention_chunk(kChunkedB, kTileT, 4, 2, 8);
  EXPECT_GT(chunk, 1);
  EXPECT_NE(kChunkedB % chunk, 0);  // the shape above runs a shorter last chunk
  EXPECT_TRUE(one_tile_attention_fits(kTileT));
  EXPECT_FALSE(one_tile_attention_fits(kTileT + 1));
}

// Scores ~1e5 and a maximum that jumps between key tiles: the running
// rescaling must not overflow, and the backward's exp(S - lse) neither.
void expect_finite_with_large_scores(const Shape& s) {
  auto qkv = uniform_vector(s.qkv_size(), 9, -1.0f, 1.0f);
  for (float& x : qkv) x *= 300.0f;
  const auto f = forward(qkv, s);
  for (float x : f.out) ASSERT_TRUE(std::isfinite(x));
  for (float x : f.lse) ASSERT_TRUE(std::isfinite(x));
  // Each output is a convex combination of value rows.
  float vmax = 0.0f;
  for (int64_t row = 0; row < s.B * s.T; ++row)
    for (int64_t c = (s.H + s.KV) * s.hs; c < s.C3(); ++c)
      vmax = std::max(vmax, std::fabs(qkv[size_t(row * s.C3() + c)]));
  for (float x : f.out) ASSERT_LE(std::fabs(x), vmax * (1.0f + 1e-5f));
  const auto dqkv = backward(uniform_vector(s.out_size(), 10), qkv, f, s);
  for (float g : dqkv) ASSERT_TRUE(std::isfinite(g));
}

TEST(FlashAttention, LargeScoresStayFinite) {
  expect_finite_with_large_scores({1, kLongT, 2, 1, 4});
  expect_finite_with_large_scores({1, kTileT, 2, 1, 4});
}

void check_gradient(const Shape& s, uint64_t key) {
  auto qkv = uniform_vector(s.qkv_size(), key, -1.5f, 1.5f);
  const auto R = uniform_vector(s.out_size(), key + 1);
  auto loss = [&] { return dot(forward(qkv, s).out, R); };
  const auto dqkv = backward(R, qkv, forward(qkv, s), s);
  expect_gradient(qkv, dqkv, loss, 1e-3f, 1e-2, "dqkv");
}

TEST(FlashAttention, GroupedBackwardMatchesFiniteDifferences) {
  check_gradient({2, 5, 4, 2, 4}, 11);
  check_gradient({1, 6, 4, 1, 4}, 13);
}

// Over more than one tile: the key/value gradients summed across tiles and
// across the heads of a group.
TEST(FlashAttention, GroupedBackwardOverTilesMatchesFiniteDifferences) { check_gradient({1, 140, 2, 1, 4}, 15); }

TEST(FlashAttention, WorkspaceGrowsLinearly) {
  const int64_t small = flash_attention_scratch_floats(1024, 64), large = flash_attention_scratch_floats(4096, 64);
  EXPECT_LT(large, 4096 * 64);                  // far below T^2 = 4096 * 4096
  EXPECT_LE(large - small, 4 * (4096 - 1024));  // a few floats per row
}

TEST(FlashAttention, RejectsBadSizes) {
  std::vector<float> qkv(1024), out(1024), lse(64), dqkv(1024), scratch(4096);
  EXPECT_NE(error_of([&] {
              flash_attention_forward(out.data(), lse.data(), qkv.data(), 1, 4, 3, 2, 4);
            }).find("flash_attention_forward"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              flash_attention_forward(out.data(), lse.data(), qkv.data(), 1, 0, 2, 2, 4);
            }).find("flash_attention_forward"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              flash_attention_backward(dqkv.data(), scratch.data(), out.data(), qkv.data(), out.data(), lse.data(), 1,
                                       4, 4, 3, 4);
            }).find("flash_attention_backward"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              flash_attention_backward(dqkv.data(), scratch.data(), out.data(), qkv.data(), out.data(), lse.data(), 1,
                                       4, 2, 0, 4);
            }).find("flash_attention_backward"),
            std::string::npos);
  EXPECT_THROW(flash_attention_scratch_floats(0, 64), Error);
}

}  // namespace
}  // namespace shardtrain::cpu
