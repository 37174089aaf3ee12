// What each strategy says before it runs (parallel::StrategySpec): the bytes
// it must send per step and rank (the run's summary compares the measured
// bytes with them), its collectives and their sizes (what `study predict`
// replays), the variants `plan` compares, and the factory's errors.
#include "runtime/parallel/strategy.h"

#include "runtime/core/error.h"
#include "runtime/parallel/shard_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain::parallel {
namespace {

// One Block of psi parameters (a multiple of the alignment: no padding).
nn::FlatParameters one_block(int64_t psi) {
  nn::ParamSpec p;
  p.name = "weight";
  p.shape = Shape{psi};
  return nn::FlatParameters({"b0"}, {{p}});
}

WireTheory theory(const std::string& strategy, int ranks, int ranks_per_node = 0, DType grad = DType::f32,
                  int micro_batches = 1, ShardingMode mode = ShardingMode::full_shard) {
  ParallelOptions o;
  o.strategy = strategy;
  o.ddp.grad_dtype = grad;
  o.fsdp.mode = mode;
  PlanInputs in;
  in.topology = {ranks, ranks_per_node > 0 ? ranks_per_node : ranks};
  in.micro_batches = micro_batches;
  return make_strategy_spec(o)->wire_theory(one_block(1000000), in);
}

TEST(StrategySpec, WireTheoryPerStrategy) {
  // 1M parameters on 4 ranks: (N-1)/N = 3/4.
  EXPECT_DOUBLE_EQ(theory("ddp", 4).bytes, 2 * 4 * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory("ddp", 4, 0, DType::bf16).bytes, 2 * 2 * 0.75 * 1e6);  // bf16 gradients
  EXPECT_DOUBLE_EQ(theory("fsdp", 4).bytes, (4 + 4 + 4) * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory("fsdp", 4, 0, DType::f32, 1, ShardingMode::shard_grad_op).bytes, (4 + 4) * 0.75 * 1e6);
  // HYBRID, 2 nodes of 2: FULL_SHARD within the node, the shard's gradient
  // all-reduced across nodes.
  EXPECT_DOUBLE_EQ(theory("fsdp", 4, 2, DType::f32, 1, ShardingMode::hybrid).bytes,
                   12 * 0.5 * 1e6 + 2 * 0.5 * 4 * 1e6 / 2);
  EXPECT_DOUBLE_EQ(theory("ddp", 1).bytes, 0.0);
  EXPECT_DOUBLE_EQ(theory("none", 1).bytes, 0.0);
}

// With k micro-batches FSDP gathers for each of them and reduces once; DDP
// (no_sync) still all-reduces once.
TEST(StrategySpec, MicroBatchesRepeatFsdpGathersOnly) {
  const WireTheory full = theory("fsdp", 4, 0, DType::f32, 2);
  EXPECT_DOUBLE_EQ(full.bytes, (2 * 2 * 4 + 4) * 0.75 * 1e6);
  EXPECT_THAT(full.formula, ::testing::HasSubstr("(2 x 4+2 x 4+4)(N-1)/N B"));
  EXPECT_DOUBLE_EQ(theory("fsdp", 4, 0, DType::f32, 2, ShardingMode::shard_grad_op).bytes, (2 * 4 + 4) * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory("ddp", 4, 0, DType::f32, 3).bytes, 2 * 4 * 0.75 * 1e6);
}

TEST(StrategySpec, PlanVariantsAndNames) {
  ParallelOptions o;
  const Topology one{1, 1}, two_nodes{4, 2};
  o.strategy = "none";
  EXPECT_EQ(make_strategy_spec(o)->plan_variants(o, one).size(), 1u);
  EXPECT_TRUE(make_strategy_spec(o)->plan_variants(o, two_nodes).empty());
  EXPECT_THROW(make_strategy_spec(o)->check(two_nodes), Error);
  o.strategy = "ddp";
  EXPECT_TRUE(make_strategy_spec(o)->plan_variants(o, one).empty());
  o.strategy = "fsdp";
  const auto fsdp = make_strategy_spec(o)->plan_variants(o, two_nodes);
  ASSERT_EQ(fsdp.size(), 3u);  // full, grad_op and, with 2 nodes of 2, hybrid
  EXPECT_EQ(make_strategy_spec(fsdp[2])->name(), "fsdp hybrid");
  EXPECT_EQ(make_strategy_spec(o)->plan_variants(o, Topology{4, 4}).size(), 2u);  // one node: no hybrid
}

// Blocks of 1000, 3000 and 17 parameters (the last padded to 32 elements).
nn::FlatParameters three_blocks() {
  auto spec = [](int64_t n) {
    nn::ParamSpec p;
    p.name = "weight";
    p.shape = Shape{n};
    return std::vector<nn::ParamSpec>{p};
  };
  return nn::FlatParameters({"b0", "b1", "b2"}, {spec(1000), spec(3008), spec(17)});
}

CommLayout layout(const std::string& strategy, int ranks, int ranks_per_node,
                  ShardingMode mode = ShardingMode::full_shard, double bucket_mb = 25.0) {
  ParallelOptions o;
  o.strategy = strategy;
  o.fsdp.mode = mode;
  o.fsdp.prefetch = 1;
  o.ddp.first_bucket_mb = o.ddp.bucket_mb = bucket_mb;
  PlanInputs in;
  in.topology = {ranks, ranks_per_node};
  return make_strategy_spec(o)->comm_layout(three_blocks(), in);
}

TEST(StrategySpec, CommLayoutListsEachStrategysCollectives) {
  const nn::FlatParameters flat = three_blocks();
  // DDP: buckets of whole Blocks, last Block first; their bytes cover the
  // flat buffer once. 0.01 MiB buckets hold one Block each here.
  const CommLayout ddp = layout("ddp", 4, 4, ShardingMode::full_shard, 0.01);
  ASSERT_EQ(ddp.buckets.size(), 3u);
  EXPECT_EQ(ddp.buckets[0].first_block, 2);
  EXPECT_EQ(ddp.buckets[2].first_block, 0);
  int64_t covered = 0;
  for (const DdpBucketLayout& b : ddp.buckets) covered += b.bytes;
  EXPECT_EQ(covered, flat.numel() * 4);
  EXPECT_FALSE(ddp.buckets_scatter);
  EXPECT_EQ(ddp.buckets[0].gather_bytes, 0);
  EXPECT_EQ(ddp.shard_group, 0);
  EXPECT_EQ(layout("ddp", 4, 4).buckets.size(), 1u);  // one bucket holds everything
  EXPECT_TRUE(layout("ddp", 1, 1).buckets.empty());   // one rank: nothing to send

  // ZeRO-1: DDP's buckets, each reduce-scattered and gathered at its size
  // padded to 4 chunks of 64 bytes.
  const CommLayout zero1 = layout("zero1", 4, 4, ShardingMode::full_shard, 0.01);
  ASSERT_EQ(zero1.buckets.size(), 3u);
  EXPECT_TRUE(zero1.buckets_scatter);
  for (size_t b = 0; b < 3; ++b) {
    const nn::BlockRange& block = flat.blocks()[2 - b];
    EXPECT_EQ(zero1.buckets[b].bytes, ShardLayout({block}, 4).padded_numel(0) * 4);
    EXPECT_EQ(zero1.buckets[b].gather_bytes, zero1.buckets[b].bytes);
    EXPECT_GE(zero1.buckets[b].bytes, block.numel * 4);
    EXPECT_EQ(zero1.buckets[b].bytes % (4 * 64), 0);
  }

  // FSDP: a gather and a reduce-scatter per Block, of its padded size.
  const CommLayout full = layout("fsdp", 4, 2);
  const ShardLayout shards(flat.blocks(), 4);
  ASSERT_EQ(full.gather_bytes.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(full.gather_bytes[size_t(b)], shards.padded_numel(b) * 4);
    EXPECT_EQ(full.reduce_bytes[size_t(b)], shards.padded_numel(b) * 4);
  }
  EXPECT_EQ(full.shard_group, 4);
  EXPECT_EQ(full.replica_group, 0);
  EXPECT_TRUE(full.replica_bytes.empty());
  EXPECT_TRUE(full.regather_in_backward);
  EXPECT_EQ(full.prefetch, 1);
  EXPECT_EQ(full.gather_buffers, 2);  // prefetch + 1
  EXPECT_EQ(full.grad_buffers, 2);
  const CommLayout grad_op = layout("fsdp", 4, 2, ShardingMode::shard_grad_op);
  EXPECT_FALSE(grad_op.regather_in_backward);
  EXPECT_EQ(grad_op.gather_buffers, 3);  // every Block stays until its backward

  // HYBRID, 2 nodes of 2: sharded within the node, each shard's chunk
  // all-reduced across the 2 nodes.
  const CommLayout hybrid = layout("fsdp", 4, 2, ShardingMode::hybrid);
  const ShardLayout node_shards(flat.blocks(), 2);
  EXPECT_EQ(hybrid.shard_group, 2);
  EXPECT_EQ(hybrid.replica_group, 2);
  ASSERT_EQ(hybrid.replica_bytes.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(hybrid.gather_bytes[size_t(b)], node_shards.padded_numel(b) * 4);
    EXPECT_EQ(hybrid.replica_bytes[size_t(b)], node_shards.block(b).chunk * 4);
  }
}

// HYBRID with shard_group_size: groups of 4 on 8 ranks in nodes of 2 (a
// group spans 2 nodes) shard over 4 and replicate twice, in the layout, the
// wire bytes and the plan's variants; a size that does not split the ranks
// is an error naming the key, and the key is HYBRID's only.
TEST(StrategySpec, HybridShardGroupSize) {
  ParallelOptions o;
  o.strategy = "fsdp";
  o.fsdp.mode = ShardingMode::hybrid;
  o.fsdp.shard_group_size = 4;
  PlanInputs in;
  in.topology = {8, 2};
  const CommLayout c = make_strategy_spec(o)->comm_layout(three_blocks(), in);
  const ShardLayout shards(three_blocks().blocks(), 4);
  EXPECT_EQ(c.shard_group, 4);
  EXPECT_EQ(c.replica_group, 2);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(c.replica_bytes[size_t(b)], shards.block(b).chunk * 4);
  EXPECT_DOUBLE_EQ(make_strategy_spec(o)->wire_theory(one_block(1000000), in).bytes,
                   12 * 0.75 * 1e6 + 2 * 0.5 * 4 * 1e6 / 4);
  // One node of 8: groups of 4 still make a HYBRID variant (of 2 groups).
  ParallelOptions base;
  base.strategy = "fsdp";
  base.fsdp.shard_group_size = 4;
  const auto variants = make_strategy_spec(base)->plan_variants(base, Topology{8, 8});
  ASSERT_EQ(variants.size(), 3u);
  EXPECT_EQ(variants[2].fsdp.shard_group_size, 4);
  EXPECT_EQ(variants[0].fsdp.shard_group_size, 0);  // FULL_SHARD: not its key
  base.fsdp.shard_group_size = 3;                   // asked for, it is an error, not a variant left out
  EXPECT_THROW(make_strategy_spec(base)->plan_variants(base, Topology{8, 8}), Error);
  o.fsdp.shard_group_size = 3;
  EXPECT_THAT([&] { make_strategy_spec(o)->comm_layout(three_blocks(), in); },
              ::testing::ThrowsMessage<Error>(
                  ::testing::HasSubstr("parallel.fsdp.shard_group_size = 3: groups of 3 ranks do not split")));
  o.fsdp.mode = ShardingMode::full_shard;
  EXPECT_THROW(validate(o.fsdp), Error);
}

TEST(StrategySpec, UnknownStrategyNamesTheValidOnes) {
  ParallelOptions o;
  o.strategy = "zero3";
  try {
    make_strategy_spec(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("parallel.strategy \"zero3\" is not a strategy (choose \"none\""));
  }
}

}  // namespace
}  // namespace shardtrain::parallel
