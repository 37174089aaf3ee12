#include "io/sampler.h"
#include "runtime/core/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace shardtrain;
using namespace shardtrain::io;

TEST(Sampler, EverySampleAtMostOncePerEpochAndRanksDisjoint) {
  const int64_t n = 1003, g = 64;
  for (int world : {1, 2, 3, 4}) {
    std::vector<Sampler> ranks;
    for (int r = 0; r < world; ++r) ranks.emplace_back(n, g, r, world, 9);
    std::set<int64_t> seen;
    std::vector<int64_t> idx;
    for (int64_t b = 0; b < ranks[0].batches_per_epoch(); ++b) {
      int64_t batch_total = 0;
      for (auto& s : ranks) {
        s.batch_indices(0, b, idx);
        batch_total += int64_t(idx.size());
        for (int64_t i : idx) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, n);
          ASSERT_TRUE(seen.insert(i).second) << "sample " << i << " twice, world " << world;
        }
      }
      EXPECT_EQ(batch_total, g);
    }
    // Drop-last: all but the final partial batch.
    EXPECT_EQ(int64_t(seen.size()), n / g * g);
  }
}

TEST(Sampler, SameSeedSameGlobalBatchWhateverTheWorldSize) {
  Sampler one(500, 40, 0, 1, 3);
  std::vector<int64_t> whole, part;
  for (int64_t b : {0, 5, 11}) {
    one.batch_indices(2, b, whole);
    std::vector<int64_t> joined;
    for (int r = 0; r < 3; ++r) {
      Sampler s(500, 40, r, 3, 3);
      s.batch_indices(2, b, part);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joined, whole);
  }
}

TEST(Sampler, EpochsAndSeedsShuffleDifferently) {
  Sampler a(1000, 100, 0, 1, 1), b(1000, 100, 0, 1, 2);
  std::vector<int64_t> e0, e1, s2;
  a.batch_indices(0, 0, e0);
  a.batch_indices(1, 0, e1);
  b.batch_indices(0, 0, s2);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, s2);
  std::vector<int64_t> again;
  a.batch_indices(0, 0, again);
  EXPECT_EQ(e0, again);
}

TEST(Sampler, UnevenSlicesDifferByAtMostOne) {
  std::vector<int64_t> sizes;
  for (int r = 0; r < 3; ++r) sizes.push_back(Sampler(100, 10, r, 3, 0).local_batch());
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 4}));
}

TEST(Sampler, BadArgumentsAreErrors) {
  EXPECT_THROW(Sampler(10, 20, 0, 1, 0), Error);  // fewer samples than a batch
  EXPECT_THROW(Sampler(100, 2, 0, 4, 0), Error);  // batch smaller than the world
  EXPECT_THROW(Sampler(100, 10, 4, 4, 0), Error);
  Sampler s(100, 10, 0, 1, 0);
  std::vector<int64_t> idx;
  EXPECT_THROW(s.batch_indices(0, 10, idx), Error);
}
