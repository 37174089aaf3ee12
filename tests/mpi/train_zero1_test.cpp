// ZeRO-1 under mpirun with 1-4 ranks: the parameters DDP gives (the same
// reduced gradients, each element updated by the same arithmetic, on the rank
// that owns it) with SGD + weight decay, AdamW, clipping, gradient
// accumulation and bf16 gradients; optimizer state of 1/N of each bucket per
// rank; its collectives, and DDP's bytes per step.
#include "runtime/comm/communicator.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/ddp.h"
#include "runtime/parallel/zero1.h"
#include "runtime/train/session.h"
#include "tests/mpi/train_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>

using namespace shardtrain;

namespace {

using namespace train::testing;

constexpr int64_t kSteps = 5;

struct Trained {
  Tensor params;  // the whole flat buffer after the steps, on this rank
  parallel::CommStats stats;
  int64_t state_numel = 0;  // elements of one optimizer state buffer
  size_t buckets = 0;
  int64_t shard_numel = 0;  // elements of a ZeRO-1 rank's shard
};

// `steps` steps of `strategy_name` ("ddp" or "zero1") over the world.
Trained run_steps(const std::string& strategy_name, const nn::ModelSpec& spec, const optim::OptimizerConfig& oc,
                  int64_t micro_batches = 1, double clip = 0.0, DType grad_dtype = DType::f32) {
  auto model = nn::build_model(spec, kSample, kClasses);
  model->initialize(5);
  parallel::ParallelOptions po;
  po.strategy = strategy_name;
  po.ddp.bucket_mb = 0.002;  // several buckets: a bucket crosses slice boundaries
  po.ddp.first_bucket_mb = 0.001;
  po.ddp.grad_dtype = grad_dtype;
  const std::unique_ptr<parallel::Strategy> strategy = parallel::make_strategy_spec(po)->start(*model, &world());
  strategy->broadcast_parameters();
  auto opt = strategy->make_optimizer(oc, train::optimizer_ranges(model->flat()));
  const Slice s = my_slice();
  train::StepBuffers b(kSample, kClasses, s.end - s.begin);
  for (int64_t step = 0; step < kSteps; ++step) {
    load_batch(step, s, b);
    train::train_step(*model, *opt, b, oc.lr, clip, kGlobalBatch, micro_batches, *strategy);
  }
  Trained run;
  run.stats = strategy->take_stats();
  run.state_numel = opt->state().empty() ? 0 : opt->state().front().second.numel();
  run.buckets = parallel::Ddp::plan_buckets(model->flat(), po.ddp).size();
  run.shard_numel = parallel::Zero1::layout(model->flat(), po.ddp, world().size()).shard_numel();
  run.params = Tensor::empty({model->flat().numel()});
  std::memcpy(run.params.f32(), model->flat().params().f32(), run.params.nbytes());
  return run;
}

}  // namespace

// Every rank reduces the same gradients as under DDP, and the optimizer's
// update of an element does not depend on which range or rank computes it.
// The reduce-scatter sums each element in its own order, the all-reduce in
// another: on two ranks that is one addition, the same bits; on more, the
// same sum within rounding (with bf16 gradients, rounded to bf16 at each
// hop: within what bf16 gradients themselves change against f32). Clipping
// sums the norm over the shards: the same within rounding.
TEST(Zero1, MatchesDdp) {
  struct Case {
    const char* name;
    nn::ModelSpec spec;
    optim::OptimizerConfig oc;
    int64_t micro_batches;
    double clip;
    DType grad_dtype;
  };
  const Case cases[] = {{"mlp sgd", four_block_mlp_spec(), sgd_with_decay(), 1, 0.0, DType::f32},
                        {"cnn sgd", cnn_spec(), sgd_with_decay(), 1, 0.0, DType::f32},
                        {"mlp adamw", four_block_mlp_spec(), adamw_with_decay(), 1, 0.0, DType::f32},
                        {"mlp adamw bf16 gradients", four_block_mlp_spec(), adamw_with_decay(), 1, 0.0, DType::bf16},
                        {"cnn adamw clip accumulation", cnn_spec(), adamw_with_decay(), 2, 0.05, DType::f32}};
  for (const Case& c : cases) {
    const Trained ddp = run_steps("ddp", c.spec, c.oc, c.micro_batches, c.clip, c.grad_dtype);
    const Trained z = run_steps("zero1", c.spec, c.oc, c.micro_batches, c.clip, c.grad_dtype);
    const double diff = max_abs_diff(z.params, ddp.params);
    if (world().rank() == 0)
      std::cout << "[diff] " << world().size() << " ranks, " << c.name << ": zero1 vs ddp max |diff| " << diff << "\n";
    if (world().size() <= 2 && c.clip == 0.0) {
      EXPECT_EQ(std::memcmp(z.params.f32(), ddp.params.f32(), z.params.nbytes()), 0) << c.name;
    } else if (c.grad_dtype == DType::bf16) {
      const Trained f32 = run_steps("ddp", c.spec, c.oc, c.micro_batches, c.clip);
      EXPECT_LE(diff, max_abs_diff(ddp.params, f32.params)) << c.name;
    } else {
      EXPECT_LE(diff, 1e-5) << c.name;
    }
    expect_identical_across_ranks(z.params);
  }
}

// Each rank keeps the optimizer state of its shard only (1/N of each
// bucket, padded); each step reduce-scatters and all-gathers each bucket
// once, and sends DDP's bytes: (N-1)/N of the gradients and of the
// parameters, against DDP's 2(N-1)/N of the gradients, padding aside (each
// chunk is a multiple of 16 elements: much of these tiny buckets).
TEST(Zero1, ShardsTheOptimizerStateAndSendsDdpsBytes) {
  const Trained ddp = run_steps("ddp", cnn_spec(), adamw_with_decay());
  const Trained z = run_steps("zero1", cnn_spec(), adamw_with_decay());
  const int n = world().size();
  const int64_t numel = ddp.params.numel();
  EXPECT_EQ(ddp.state_numel, numel);
  EXPECT_EQ(z.state_numel, z.shard_numel);
  EXPECT_LE(z.shard_numel * n, numel + int64_t(z.buckets) * n * 16);
  if (n == 1) return;
  EXPECT_EQ(z.stats.collectives, kSteps * 2 * int64_t(z.buckets));
  EXPECT_EQ(z.stats.wire_bytes, kSteps * 2 * (n - 1) * z.shard_numel * 4);
  const double ratio = double(z.stats.wire_bytes) / double(ddp.stats.wire_bytes);
  if (world().rank() == 0) std::cout << "[bytes] " << n << " ranks: zero1 / ddp wire bytes " << ratio << "\n";
  EXPECT_NEAR(ratio, double(n * z.shard_numel) / double(numel), 1e-3);
}
