#include "kernels/ops.h"
#include "runtime/optim/clip.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::optim;

namespace {
Tensor filled(std::initializer_list<float> v) {
  Tensor t = Tensor::empty({int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}
}  // namespace

TEST(Optimizer, SgdUpdatesOnlyItsRangesAndDecaysOnlyWhereAsked) {
  OptimizerConfig c;
  c.kind = optim::OptimizerKind::sgd;
  c.momentum = 0.0f;
  c.weight_decay = 0.5f;
  // elements 0-1: decayed weights, 2: a bias (no decay), 3: padding (no range)
  auto opt = make_optimizer(c, 4, {{0, 2, true}, {2, 1, false}});
  Tensor p = filled({1.0f, 2.0f, 3.0f, 9.0f});
  Tensor g = filled({0.1f, 0.2f, 0.3f, 5.0f});
  opt->step(p, g, 0.1f);
  EXPECT_FLOAT_EQ(p.f32()[0], 1.0f - 0.1f * (0.1f + 0.5f * 1.0f));
  EXPECT_FLOAT_EQ(p.f32()[1], 2.0f - 0.1f * (0.2f + 0.5f * 2.0f));
  EXPECT_FLOAT_EQ(p.f32()[2], 3.0f - 0.1f * 0.3f);
  EXPECT_EQ(p.f32()[3], 9.0f);
  EXPECT_EQ(opt->steps_taken(), 1);
  EXPECT_TRUE(opt->state().empty());  // no momentum, no state
}

TEST(Optimizer, SgdMomentumBySteps) {
  OptimizerConfig c;
  c.momentum = 0.9f;
  auto opt = make_optimizer(c, 1, {{0, 1, true}});
  Tensor p = filled({1.0f}), g = filled({0.5f});
  opt->step(p, g, 0.1f);  // buf = 0.5
  EXPECT_FLOAT_EQ(p.f32()[0], 1.0f - 0.05f);
  opt->step(p, g, 0.1f);  // buf = 0.9*0.5 + 0.5 = 0.95
  EXPECT_FLOAT_EQ(p.f32()[0], 1.0f - 0.05f - 0.095f);
  ASSERT_EQ(opt->state().size(), 1u);
  EXPECT_FLOAT_EQ(opt->state()[0].second.f32()[0], 0.95f);
}

TEST(Optimizer, AdamWFirstStepMovesByLr) {
  OptimizerConfig c;
  c.kind = optim::OptimizerKind::adamw;
  c.weight_decay = 0.0f;
  auto opt = make_optimizer(c, 2, {{0, 2, true}});
  Tensor p = filled({1.0f, -1.0f}), g = filled({0.3f, -2.0f});
  opt->step(p, g, 0.01f);
  // After bias correction the first step is lr * g/|g| (up to eps).
  EXPECT_NEAR(p.f32()[0], 1.0f - 0.01f, 1e-6);
  EXPECT_NEAR(p.f32()[1], -1.0f + 0.01f, 1e-6);
  EXPECT_EQ(opt->state().size(), 2u);
}

// The step's scalars (rate, bias corrections) written ahead of the update,
// as the trainer does before a CUDA graph that holds the update, or by the
// update itself, or first at a stale rate that the update replaces: the
// same bits over steps at changing rates.
TEST(Optimizer, ScalarsPreparedAheadGiveTheSameSteps) {
  for (const OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    OptimizerConfig c;
    c.kind = kind;
    c.weight_decay = 0.1f;
    const std::vector<ParamRange> ranges = {{0, 2, true}, {2, 2, false}};
    auto plain = make_optimizer(c, 4, ranges), ahead = make_optimizer(c, 4, ranges),
         stale = make_optimizer(c, 4, ranges);
    Tensor p1 = filled({1.0f, -2.0f, 0.5f, 3.0f}), p2 = filled({1.0f, -2.0f, 0.5f, 3.0f}),
           p3 = filled({1.0f, -2.0f, 0.5f, 3.0f});
    const Tensor g = filled({0.3f, -0.2f, 0.1f, 0.7f});
    for (const float lr : {0.01f, 0.03f, 0.02f}) {
      plain->step(p1, g, lr);
      ahead->prepare(lr);
      ahead->update(p2, g, lr, 0, 4);
      ahead->finish_step();
      stale->prepare(lr * 2.0f);
      stale->update(p3, g, lr, 0, 2);  // in two pieces, as DDP's buckets
      stale->update(p3, g, lr, 2, 4);
      stale->finish_step();
    }
    EXPECT_EQ(std::memcmp(p1.raw(), p2.raw(), p1.nbytes()), 0) << name_of(kind);
    EXPECT_EQ(std::memcmp(p1.raw(), p3.raw(), p1.nbytes()), 0) << name_of(kind);
    EXPECT_NE(p1.f32()[0], 1.0f);
  }
}

TEST(Optimizer, BadSettingsAreErrors) {
  OptimizerConfig c;
  EXPECT_FALSE(parse_enum<OptimizerKind>("lion").has_value());  // the config refuses the name
  c.lr = std::numeric_limits<float>::infinity();
  EXPECT_THROW(make_optimizer(c, 1, {}), Error);
  c.lr = 0.1f;
  c.kind = optim::OptimizerKind::sgd;
  c.nesterov = true;
  c.momentum = 0.0f;
  EXPECT_THROW(make_optimizer(c, 1, {}), Error);
  c.kind = optim::OptimizerKind::adamw;
  c.beta2 = 1.0f;
  EXPECT_THROW(make_optimizer(c, 1, {}), Error);
}

TEST(Schedule, WarmupThenCosineToMinLr) {
  ScheduleConfig c;
  c.kind = optim::ScheduleKind::cosine;
  c.warmup_steps = 10;
  c.min_lr = 0.01f;
  LrSchedule s(c, 0.1f, 110);
  EXPECT_FLOAT_EQ(s.at(0), 0.01f);
  EXPECT_FLOAT_EQ(s.at(4), 0.05f);
  EXPECT_FLOAT_EQ(s.at(10), 0.1f);
  EXPECT_NEAR(s.at(60), 0.055f, 1e-6);  // halfway
  EXPECT_NEAR(s.at(110), 0.01f, 1e-7);
  EXPECT_NEAR(s.at(500), 0.01f, 1e-7);  // past the end stays at min_lr
}

TEST(Schedule, StepDecayAndConstant) {
  ScheduleConfig c;
  c.kind = optim::ScheduleKind::step;
  c.step_size = 100;
  c.gamma = 0.5f;
  LrSchedule s(c, 1.0f, 1000);
  EXPECT_FLOAT_EQ(s.at(99), 1.0f);
  EXPECT_FLOAT_EQ(s.at(100), 0.5f);
  EXPECT_FLOAT_EQ(s.at(250), 0.25f);
  // With warmup, the steps count from its end (as PyTorch's StepLR after a
  // warmup phase): the full rate for step_size steps, then the decays.
  c.warmup_steps = 10;
  LrSchedule w(c, 1.0f, 1000);
  EXPECT_FLOAT_EQ(w.at(9), 1.0f);
  EXPECT_FLOAT_EQ(w.at(10), 1.0f);
  EXPECT_FLOAT_EQ(w.at(109), 1.0f);
  EXPECT_FLOAT_EQ(w.at(110), 0.5f);
  c.warmup_steps = 0;
  ScheduleConfig k;
  EXPECT_FLOAT_EQ(LrSchedule(k, 0.3f, 10).at(7), 0.3f);
  c.step_size = 0;
  EXPECT_THROW(LrSchedule(c, 1.0f, 10), Error);
  EXPECT_FALSE(parse_enum<ScheduleKind>("linear-ish").has_value());
  k.min_lr = 2.0f;  // above the peak rate
  EXPECT_THROW(LrSchedule(k, 1.0f, 10), Error);
}

TEST(Clip, ScalesToMaxNormOnlyWhenAbove) {
  Tensor g = filled({3.0f, 4.0f});
  clip_grad_norm(g, 10.0);
  EXPECT_EQ(g.f32()[0], 3.0f);
  EXPECT_EQ(g.f32()[1], 4.0f);
  clip_grad_norm(g, 1.0);
  // The factor torch.nn.utils.clip_grad_norm_ uses: max / (norm + 1e-6).
  const float s = float(1.0 / (5.0 + 1e-6));
  EXPECT_EQ(g.f32()[0], 3.0f * s);
  EXPECT_EQ(g.f32()[1], 4.0f * s);
  EXPECT_NEAR(std::hypot(g.f32()[0], g.f32()[1]), 1.0, 1e-6);
  Tensor h = filled({3.0f, 4.0f});
  clip_grad_norm(h, 0.0);  // 0 = off
  EXPECT_EQ(h.f32()[1], 4.0f);
}

// FSDP's form: the squared norm in a tensor (summed over shards), then the
// same factor as clipping by the norm of the whole.
TEST(Clip, SquaredNormFormMatchesTheWhole) {
  const Tensor a = filled({3.0f, 0.5f}), b = filled({4.0f, -2.0f});
  Tensor whole = filled({3.0f, 0.5f, 4.0f, -2.0f});
  clip_grad_norm(whole, 1.5);
  Tensor sq_a = Tensor::empty({1}), sq_b = Tensor::empty({1});
  ops::sum_squares(sq_a, a);
  ops::sum_squares(sq_b, b);
  EXPECT_EQ(sq_a.f32()[0], 9.25f);
  Tensor sq = filled({sq_a.f32()[0] + sq_b.f32()[0]});
  ops::clip_to_squared_norm(a, sq, 1.5);
  ops::clip_to_squared_norm(b, sq, 1.5);
  EXPECT_EQ(a.f32()[0], whole.f32()[0]);
  EXPECT_EQ(a.f32()[1], whole.f32()[1]);
  EXPECT_EQ(b.f32()[0], whole.f32()[2]);
  EXPECT_EQ(b.f32()[1], whole.f32()[3]);
  EXPECT_THROW(ops::clip_to_squared_norm(a, filled({1.0f, 2.0f}), 1.5), Error);
}
