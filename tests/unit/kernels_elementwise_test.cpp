#include "kernels/cpu/elementwise.h"

#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::uniform_vector;

uint16_t bf16_bits_of(uint32_t f32_bits) {
  bf16 out;
  const float in = std::bit_cast<float>(f32_bits);
  f32_to_bf16(&out, &in, 1);
  return out.bits;
}

TEST(Bf16, RoundsToNearestEven) {
  // 1.0 = 0x3F800000; bf16 keeps the top 16 bits, so 0x8000 in the low half is a tie.
  EXPECT_EQ(bf16_bits_of(0x3F800000u), 0x3F80);  // exact
  EXPECT_EQ(bf16_bits_of(0x3F807FFFu), 0x3F80);  // just below half: down
  EXPECT_EQ(bf16_bits_of(0x3F808000u), 0x3F80);  // tie, 0x3F80 is even: down
  EXPECT_EQ(bf16_bits_of(0x3F808001u), 0x3F81);  // just above half: up
  EXPECT_EQ(bf16_bits_of(0x3F818000u), 0x3F82);  // tie, 0x3F81 is odd: up to even
  EXPECT_EQ(bf16_bits_of(0xBF818000u), 0xBF82);  // same for negatives
  EXPECT_EQ(bf16_bits_of(0x3FFF8000u), 0x4000);  // the carry moves into the exponent
  EXPECT_EQ(bf16_bits_of(0x00008000u), 0x0000);  // subnormal tie to even (zero)
  EXPECT_EQ(bf16_bits_of(0x00018000u), 0x0002);  // subnormal tie, odd: up
}

TEST(Bf16, InfinitiesOverflowAndNaN) {
  EXPECT_EQ(bf16_bits_of(0x7F800000u), 0x7F80);  // +inf
  EXPECT_EQ(bf16_bits_of(0xFF800000u), 0xFF80);  // -inf
  EXPECT_EQ(bf16_bits_of(0x7F7FFFFFu), 0x7F80);  // FLT_MAX rounds up to +inf
  EXPECT_EQ(bf16_bits_of(0x7F7F7FFFu), 0x7F7F);  // the largest finite bf16 stays finite
  // NaN stays NaN, even when only low mantissa bits are set (plain
  // truncation would turn 0x7F800001 into +inf) and with the sign set.
  for (uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0xFFC00000u}) {
    const uint16_t b = bf16_bits_of(nan_bits);
    EXPECT_EQ(b & 0x7F80, 0x7F80) << std::hex << nan_bits;
    EXPECT_NE(b & 0x007F, 0) << std::hex << nan_bits;
    EXPECT_EQ(b & 0x8000, (nan_bits >> 16) & 0x8000) << std::hex << nan_bits;
  }
}

TEST(Bf16, RoundTripsRepresentableValues) {
  // Every bf16 bit pattern that is not NaN converts to f32 and back unchanged.
  std::vector<bf16> all;
  for (uint32_t b = 0; b < 0x10000; ++b)
    if ((b & 0x7F80) != 0x7F80 || (b & 0x7F) == 0) all.push_back(bf16{uint16_t(b)});
  std::vector<float> f(all.size());
  std::vector<bf16> back(all.size());
  bf16_to_f32(f.data(), all.data(), int64_t(all.size()));
  f32_to_bf16(back.data(), f.data(), int64_t(f.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(back[i].bits, all[i].bits) << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(f[i]), uint32_t(all[i].bits) << 16);
  }
}

TEST(Bf16, ArraysConvertAsEveryElementAlone) {
  // The array conversion is vectorized (and cloned per instruction set):
  // every element, in the vector body and the tail, must get to_bf16's bits.
  // Bit patterns across the whole f32 range, each low half's ties and
  // carries included, plus the special values, in an array whose length is
  // no multiple of a vector.
  std::vector<uint32_t> patterns;
  for (uint64_t hi = 0; hi < 0x10000; hi += 3)
    for (uint32_t lo : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) patterns.push_back(uint32_t(hi << 16) | lo);
  for (uint32_t special : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7F7FFFFFu, 0x00000001u})
    patterns.push_back(special);
  patterns.push_back(0x3F808000u);
  std::vector<float> in(patterns.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::bit_cast<float>(patterns[i]);
  std::vector<bf16> out(in.size());
  f32_to_bf16(out.data(), in.data(), int64_t(in.size()));
  std::vector<float> back(in.size());
  bf16_to_f32(back.data(), out.data(), int64_t(out.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i].bits, to_bf16(in[i]).bits) << std::hex << patterns[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), uint32_t(out[i].bits) << 16) << std::hex << patterns[i];
  }
}

TEST(Bf16, MatrixRowsPackDensely) {
  // A 5 x 3 slice of a matrix with row stride 7, starting at column 2.
  std::vector<float> m(5 * 7);
  for (size_t i = 0; i < m.size(); ++i) m[i] = 1.0f + float(i) / 1024.0f + float(i) * 3e-6f;
  std::vector<bf16> out(5 * 3);
  f32_to_bf16_rows(out.data(), m.data() + 2, 5, 3, 7);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[size_t(r * 3 + c)].bits, to_bf16(m[size_t(r * 7 + 2 + c)]).bits);
}

TEST(Elementwise, SumSquaresIsExactForSmallIntegers) {
  std::vector<float> x(1001);
  double expected = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(int(i % 7) - 3);
    expected += double(x[i]) * x[i];
  }
  EXPECT_EQ(sum_squares(x.data(), int64_t(x.size())), expected);
  EXPECT_EQ(sum_squares(x.data(), 0), 0.0);
}

TEST(Elementwise, AddScaleAccumulate) {
  const auto a = uniform_vector(19, 1), b = uniform_vector(19, 2);
  std::vector<float> out(19);
  add(out.data(), a.data(), b.data(), 19);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  auto y = a;
  add(y.data(), y.data(), b.data(), 19);  // out may alias a
  EXPECT_EQ(y, out);
  accumulate(y.data(), b.data(), 19);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(y[i], out[i] + b[i]);
  scale_inplace(y.data(), 19, 0.5f);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(y[i], (out[i] + b[i]) * 0.5f);
}

// Every start (aligned or not to a cache line) and length (shorter than a
// line, with and without a ragged end): memcpy's bits, nothing outside
// the range touched.
TEST(Elementwise, CopyStreamingCopiesExactlyTheRange) {
  const auto src = testing::uniform_vector(300, 5);
  for (int64_t offset = 0; offset < 17; ++offset)
    for (int64_t n : {0, 1, 3, 15, 16, 17, 64, 131, 250}) {
      std::vector<float> dst(300 + 32, -7.0f), expected = dst;
      std::copy(src.begin(), src.begin() + n, expected.begin() + offset);
      copy_streaming(dst.data() + offset, src.data(), n);
      EXPECT_EQ(dst, expected) << "offset " << offset << " n " << n;
    }
}

TEST(Elementwise, U8Normalization) {
  const std::vector<uint8_t> in = {0, 1, 127, 128, 255};
  std::vector<float> out(in.size());
  const float mean = 0.2860f, std = 0.3530f;  // Fashion-MNIST
  u8_to_f32_normalized(out.data(), in.data(), int64_t(in.size()), mean, std);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(out[i], (in[i] / 255.0 - mean) / std, 1e-6) << int(in[i]);
}

}  // namespace
}  // namespace shardtrain::cpu
