#include "runtime/core/dtype.h"
#include "runtime/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace shardtrain;

TEST(Rng, SameKeySameStream) {
  Rng a(stream_key(1, 2, 3)), b(stream_key(1, 2, 3)), c(stream_key(1, 2, 4));
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= (x != c.next_u64());
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, UniformAndBelowStayInRange) {
  Rng r(42);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    const uint64_t k = r.below(7);
    ASSERT_LT(k, 7u);
    ++counts[k];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);  // ~5 sigma
}

TEST(Rng, NormalHasUnitMoments) {
  Rng r(7);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even.
  EXPECT_EQ(to_bf16(1.00390625f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(1.01171875f).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(to_f32(to_bf16(NAN))));
  EXPECT_EQ(to_f32(to_bf16(INFINITY)), INFINITY);
  EXPECT_EQ(to_f32(to_bf16(-2.5f)), -2.5f);
}
