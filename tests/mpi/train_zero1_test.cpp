// ZeRO-1 under mpirun with 1-4 ranks: the parameters DDP gives (the same
// reduced gradients, each element updated by the same arithmetic, on the rank
// that owns it) with SGD + weight decay, AdamW, clipping and gradient
// accumulation; optimizer state of one slice per rank; its collectives and
// bytes per step.
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
};

// `steps` steps of `strategy_name` ("ddp" or "zero1") over the world.
Trained run_steps(const std::string& strategy_name, const nn::ModelSpec& spec, const optim::OptimizerConfig& oc,
                  int64_t micro_batches = 1, double clip = 0.0) {
  auto model = nn::build_model(spec, kSample, kClasses);
  model->initialize(5);
  parallel::ParallelOptions po;
  po.strategy = strategy_name;
  po.ddp.bucket_mb = 0.002;  // several buckets: a bucket crosses slice boundaries
  po.ddp.first_bucket_mb = 0.001;
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
  run.params = Tensor::empty({model->flat().numel()});
  std::memcpy(run.params.f32(), model->flat().params().f32(), run.params.nbytes());
  return run;
}

}  // namespace

// Bit for bit: every rank reduces the same gradients as under DDP, and the
// optimizer's update of an element does not depend on which range or rank
// computes it.
TEST(Zero1, MatchesDdpBitForBit) {
  struct Case {
    const char* name;
    nn::ModelSpec spec;
    optim::OptimizerConfig oc;
    int64_t micro_batches;
    double clip;
  };
  const Case cases[] = {{"mlp sgd", four_block_mlp_spec(), sgd_with_decay(), 1, 0.0},
                        {"cnn sgd", cnn_spec(), sgd_with_decay(), 1, 0.0},
                        {"mlp adamw", four_block_mlp_spec(), adamw_with_decay(), 1, 0.0},
                        {"cnn adamw clip accumulation", cnn_spec(), adamw_with_decay(), 2, 0.05}};
  for (const Case& c : cases) {
    const Trained ddp = run_steps("ddp", c.spec, c.oc, c.micro_batches, c.clip);
    const Trained z = run_steps("zero1", c.spec, c.oc, c.micro_batches, c.clip);
    const double diff = max_abs_diff(z.params, ddp.params);
    if (world().rank() == 0)
      std::cout << "[diff] " << world().size() << " ranks, " << c.name << ": zero1 vs ddp max |diff| " << diff << "\n";
    EXPECT_EQ(diff, 0.0) << c.name;
    EXPECT_EQ(std::memcmp(z.params.f32(), ddp.params.f32(), z.params.nbytes()), 0) << c.name;
    expect_identical_across_ranks(z.params);
  }
}

// Each rank keeps the optimizer state of its slice only; each step issues
// DDP's buckets and one all-gather, which sends (N-1) slices.
TEST(Zero1, ShardsTheOptimizerStateAndGathersOncePerStep) {
  const Trained ddp = run_steps("ddp", cnn_spec(), adamw_with_decay());
  const Trained z = run_steps("zero1", cnn_spec(), adamw_with_decay());
  const int n = world().size();
  const int64_t numel = ddp.params.numel(), slice = parallel::Zero1::slice_numel(numel, n);
  EXPECT_EQ(ddp.state_numel, numel);
  EXPECT_EQ(z.state_numel, std::min(slice, numel - world().rank() * slice));
  EXPECT_EQ(z.stats.collectives, kSteps * int64_t(z.buckets + 1));
  EXPECT_EQ(z.stats.wire_bytes - ddp.stats.wire_bytes, kSteps * (n - 1) * slice * 4);
}
