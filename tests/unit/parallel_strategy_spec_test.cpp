// What each strategy says before it runs (parallel::StrategySpec): the bytes
// it must send per step and rank (the run's summary compares the measured
// bytes with them), its collectives, the variants `plan` compares, and the
// factory's errors.
#include "runtime/parallel/strategy.h"

#include "runtime/core/error.h"

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
