// FSDP's shard layout: padding, shard bounds, every element owned exactly
// once, and the optimizer ranges of a shard (weight decay kept per piece).
#include "runtime/parallel/shard_layout.h"

#include <gtest/gtest.h>

#include <vector>

using namespace shardtrain;
using parallel::ShardLayout;

namespace {

const std::vector<nn::BlockRange> kBlocks{{0, 48}, {48, 16}, {64, 1008}, {1072, 32}};

}  // namespace

TEST(ShardLayout, PadsEachBlockToWorldTimesAnAlignedChunk) {
  for (int world = 1; world <= 7; ++world) {
    const ShardLayout l(kBlocks, world);
    int64_t local = 0, max_padded = 0;
    for (int b = 0; b < int(kBlocks.size()); ++b) {
      const parallel::BlockShard& s = l.block(b);
      EXPECT_EQ(s.flat_offset, kBlocks[size_t(b)].offset);
      EXPECT_EQ(s.numel, kBlocks[size_t(b)].numel);
      EXPECT_EQ(s.chunk % ShardLayout::kChunkAlign, 0);
      EXPECT_GE(s.chunk * world, s.numel);
      EXPECT_LT(s.chunk * world - s.numel, world * ShardLayout::kChunkAlign);  // minimal padding
      EXPECT_EQ(s.local_offset, local);
      local += s.chunk;
      max_padded = std::max(max_padded, l.padded_numel(b));
    }
    EXPECT_EQ(l.shard_numel(), local);
    EXPECT_EQ(l.max_padded_numel(), max_padded);
  }
  const ShardLayout two(kBlocks, 2);
  EXPECT_EQ(two.block(2).chunk, 512);  // 1008 / 2 = 504 -> 512
  EXPECT_EQ(two.block(1).chunk, 16);   // 16 / 2 = 8 -> 16: rank 1's chunk is all padding
  EXPECT_EQ(two.owned(1, 1).begin, two.owned(1, 1).end);
}

TEST(ShardLayout, EveryElementIsOwnedExactlyOnce) {
  for (int world = 1; world <= 7; ++world) {
    const ShardLayout l(kBlocks, world);
    std::vector<int> owners(1104, 0);
    for (int b = 0; b < int(kBlocks.size()); ++b)
      for (int r = 0; r < world; ++r) {
        const ShardLayout::Owned o = l.owned(b, r);
        EXPECT_LE(o.begin, o.end);
        EXPECT_LE(o.end - o.begin, l.block(b).chunk);
        for (int64_t i = o.begin; i < o.end; ++i) ++owners[size_t(i)];
      }
    for (size_t i = 0; i < owners.size(); ++i) ASSERT_EQ(owners[i], 1) << "element " << i << ", " << world << " ranks";
  }
}

TEST(ShardLayout, ShardRangesCutParametersAndKeepWeightDecay) {
  // Block 2 (flat 64..1072): weights 64..1064 decayed, bias 1064..1072 not;
  // block 0: one decayed weight 0..40, bias 40..44, padding 44..48.
  const std::vector<optim::ParamRange> full{{0, 40, true},    {40, 4, false},   {48, 16, true},
                                            {64, 1000, true}, {1064, 8, false}, {1072, 32, true}};
  for (int world = 1; world <= 7; ++world) {
    const ShardLayout l(kBlocks, world);
    // Map every shard-local element back to the flat buffer: each parameter
    // element appears in exactly one rank's ranges, with its decay setting.
    std::vector<int> seen(1104, 0);
    for (int r = 0; r < world; ++r) {
      for (const optim::ParamRange& pr : l.shard_ranges(full, r)) {
        for (int64_t i = pr.offset; i < pr.offset + pr.numel; ++i) {
          int b = 0;
          while (b + 1 < int(kBlocks.size()) && l.block(b + 1).local_offset <= i) ++b;
          ASSERT_LT(i - l.block(b).local_offset, l.block(b).chunk);
          const int64_t flat = l.block(b).flat_offset + r * l.block(b).chunk + (i - l.block(b).local_offset);
          ++seen[size_t(flat)];
          bool decay = false, found = false;
          for (const optim::ParamRange& f : full)
            if (flat >= f.offset && flat < f.offset + f.numel) decay = f.decay, found = true;
          ASSERT_TRUE(found) << "flat element " << flat << " is padding";
          ASSERT_EQ(decay, pr.decay) << "flat element " << flat;
        }
      }
    }
    for (const optim::ParamRange& f : full)
      for (int64_t i = f.offset; i < f.offset + f.numel; ++i) ASSERT_EQ(seen[size_t(i)], 1) << i;
    for (int64_t i : {44, 45, 46, 47}) EXPECT_EQ(seen[size_t(i)], 0);  // padding: no range
  }
  // Two ranks: block 2's chunk of 512 cuts the weight 64..1064 at 576.
  const ShardLayout two(kBlocks, 2);
  const auto r1 = two.shard_ranges(full, 1);
  // Rank 1: block 0 owns 32..48 -> weight 32..40 (decay), bias 40..44 (no decay).
  ASSERT_GE(r1.size(), 2u);
  EXPECT_EQ(r1[0].offset, 0);
  EXPECT_EQ(r1[0].numel, 8);
  EXPECT_TRUE(r1[0].decay);
  EXPECT_EQ(r1[1].offset, 8);
  EXPECT_EQ(r1[1].numel, 4);
  EXPECT_FALSE(r1[1].decay);
}
