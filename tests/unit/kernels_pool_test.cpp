#include "kernels/cpu/pool.h"

#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

// Distinct values 0.1 apart in a random order: no ties, and a probe of 1e-2
// cannot change which element is the maximum.
std::vector<float> distinct_values(size_t n, uint64_t key) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  Rng rng(key);
  for (size_t i = n; i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  for (float& x : v) x = 0.1f * x - 0.05f * float(n);
  return v;
}

const std::vector<Pool2dShape> kShapes = {
    {2, 3, 6, 8, 2, 2},  // the common 2x2/2 (its own code path)
    {1, 2, 7, 5, 2, 2},  // 2x2/2 with an odd last row and column left out
    {1, 2, 7, 5, 3, 2},  // overlapping windows, odd sizes (last row/column unused)
    {2, 1, 5, 5, 2, 1},  // stride 1
};

TEST(MaxPool, ForwardMatchesNaiveScan) {
  for (const auto& s : kShapes) {
    const auto in = uniform_vector(s.B * s.C * s.H * s.W, 1);
    const int64_t OH = s.OH(), OW = s.OW();
    std::vector<float> out(s.B * s.C * OH * OW);
    std::vector<int32_t> arg(out.size());
    maxpool2d_forward(out.data(), arg.data(), in.data(), s);
    for (int64_t p = 0; p < s.B * s.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float best = -1e30f;
          int32_t best_i = -1;
          for (int64_t ki = 0; ki < s.K; ++ki)
            for (int64_t kj = 0; kj < s.K; ++kj) {
              const int64_t i = (oh * s.stride + ki) * s.W + ow * s.stride + kj;
              if (in[p * s.H * s.W + i] > best) {
                best = in[p * s.H * s.W + i];
                best_i = int32_t(i);
              }
            }
          const int64_t o = (p * OH + oh) * OW + ow;
          EXPECT_EQ(out[o], best);
          EXPECT_EQ(arg[o], best_i);
        }
  }
}

TEST(MaxPool, TiesPickTheFirstElement) {
  const Pool2dShape s{1, 1, 4, 4, 2, 2};
  const std::vector<float> in = {1, 1, 0, 2,  //
                                 1, 1, 2, 2,  //
                                 3, 0, 5, 4,  //
                                 0, 3, 5, 5};
  std::vector<float> out(4);
  std::vector<int32_t> arg(4);
  maxpool2d_forward(out.data(), arg.data(), in.data(), s);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 5}));
  EXPECT_EQ(arg, (std::vector<int32_t>{0, 3, 8, 10}));
}

// The 2x2/2 forward's and backward's AVX-512 rows against their portable
// loops, bit for bit (outputs, indices and input gradients): rows of 7 and 14 outputs (the reference CNN's),
// 16, 17 and 33 (whole vectors and a tail), odd sizes, and values with
// ties, signed zeros, infinities and NaNs, where the order of the compares
// decides.
TEST(MaxPool, WideRowsMatchThePortableLoopsExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials = {0.0f, -0.0f, 1.0f, 1.0f, nan, inf, -inf, -1.0f};
  const std::vector<Pool2dShape> shapes = {
      {2, 3, 14, 14, 2, 2}, {1, 2, 28, 28, 2, 2}, {1, 1, 4, 32, 2, 2}, {1, 2, 5, 35, 2, 2}, {1, 1, 3, 67, 2, 2}};
  for (const Pool2dShape& s : shapes) {
    auto in = uniform_vector(s.B * s.C * s.H * s.W, 7);
    Rng rng(8);
    for (float& x : in)
      if (rng.below(3) == 0) x = specials[rng.below(specials.size())];
    const size_t outputs = size_t(s.B * s.C * s.OH() * s.OW());
    std::vector<float> out_wide(outputs), out_portable(outputs);
    std::vector<int32_t> arg_wide(outputs), arg_portable(outputs);
    const bool before = set_maxpool_avx512(true);
    maxpool2d_forward(out_wide.data(), arg_wide.data(), in.data(), s);
    set_maxpool_avx512(false);
    maxpool2d_forward(out_portable.data(), arg_portable.data(), in.data(), s);
    set_maxpool_avx512(before);
    EXPECT_EQ(std::memcmp(out_wide.data(), out_portable.data(), outputs * sizeof(float)), 0) << s.H << "x" << s.W;
    EXPECT_EQ(arg_wide, arg_portable) << s.H << "x" << s.W;
    // The backward from those indices, into NaN-filled gradients: every
    // input element written, the same bits.
    const auto dout = uniform_vector(outputs, 9);
    std::vector<float> din_wide(in.size(), nan), din_portable(in.size(), nan);
    set_maxpool_avx512(true);
    maxpool2d_backward(din_wide.data(), dout.data(), arg_portable.data(), s);
    set_maxpool_avx512(false);
    maxpool2d_backward(din_portable.data(), dout.data(), arg_portable.data(), s);
    set_maxpool_avx512(before);
    EXPECT_EQ(std::memcmp(din_wide.data(), din_portable.data(), in.size() * sizeof(float)), 0) << s.H << "x" << s.W;
    for (float g : din_wide) ASSERT_FALSE(std::isnan(g)) << s.H << "x" << s.W;
  }
}

// A 2x2 backward past 8 MiB is made in a staging buffer and streamed out:
// the same bits as each sample's backward alone (which writes in place),
// at plane sizes that do and do not divide the staging buffer.
TEST(MaxPool, StreamedBackwardMatchesTheInPlaceOne) {
  for (const Pool2dShape& s : {Pool2dShape{96, 32, 28, 28, 2, 2}, Pool2dShape{200, 64, 14, 14, 2, 2}}) {
    const int64_t plane = s.H * s.W, outputs = s.OH() * s.OW(), per_sample = s.C * plane;
    ASSERT_GT(s.B * per_sample * int64_t(sizeof(float)), int64_t(8) << 20);
    const auto in = uniform_vector(s.B * per_sample, 11);
    const auto dout = uniform_vector(s.B * s.C * outputs, 12);
    std::vector<float> out(dout.size());
    std::vector<int32_t> arg(dout.size());
    maxpool2d_forward(out.data(), arg.data(), in.data(), s);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> streamed(in.size() + 1, nan), each(in.size() + 1, nan);
    maxpool2d_backward(streamed.data() + 1, dout.data(), arg.data(), s);  // +1: not line-aligned
    Pool2dShape one = s;
    one.B = 1;
    for (int64_t b = 0; b < s.B; ++b)
      maxpool2d_backward(each.data() + 1 + b * per_sample, dout.data() + b * s.C * outputs,
                         arg.data() + b * s.C * outputs, one);
    EXPECT_EQ(std::memcmp(streamed.data(), each.data(), streamed.size() * sizeof(float)), 0) << s.H << "x" << s.W;
  }
}

TEST(MaxPool, BackwardMatchesFiniteDifferences) {
  for (const auto& s : kShapes) {
    auto in = distinct_values(s.B * s.C * s.H * s.W, 2);
    const auto R = uniform_vector(s.B * s.C * s.OH() * s.OW(), 3);
    std::vector<float> out(R.size()), din(in.size(), 123.0f);
    std::vector<int32_t> arg(R.size());
    maxpool2d_forward(out.data(), arg.data(), in.data(), s);
    maxpool2d_backward(din.data(), R.data(), arg.data(), s);
    expect_gradient(
        in, din,
        [&] {
          maxpool2d_forward(out.data(), arg.data(), in.data(), s);
          return dot(out, R);
        },
        1e-2f, 1e-4, "maxpool din");
  }
}

TEST(MaxPool, OverlappingWindowsSumOnASharedMaximum) {
  // 3x3 windows with stride 2 on a 3x5 image share column 2; its maximum
  // wins both windows and receives both gradients.
  const Pool2dShape s{1, 1, 3, 5, 3, 2};
  std::vector<float> in(15, 0.0f);
  in[1 * 5 + 2] = 9.0f;
  std::vector<float> out(2), din(15, -1.0f);
  std::vector<int32_t> arg(2);
  maxpool2d_forward(out.data(), arg.data(), in.data(), s);
  EXPECT_EQ(arg, (std::vector<int32_t>{7, 7}));
  const std::vector<float> dout = {0.25f, 0.5f};
  maxpool2d_backward(din.data(), dout.data(), arg.data(), s);
  std::vector<float> expected(15, 0.0f);
  expected[7] = 0.75f;
  EXPECT_EQ(din, expected);
}

}  // namespace
}  // namespace shardtrain::cpu
