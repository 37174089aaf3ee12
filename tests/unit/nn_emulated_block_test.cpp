// Emulated compute: a model whose Blocks wait a profile keeps the real
// model's parameters and layout, returns outputs of the real shapes,
// writes no gradient, and waits at least the profiled times, in
// proportion to the batch; back-to-back waits on the ComputeClock add up
// to their sum, not to their sum plus each wake-up's lateness, even
// waits shorter than that lateness.
#include "runtime/core/clock.h"
#include "runtime/core/compute_clock.h"
#include "runtime/nn/models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::nn;

namespace {

std::unique_ptr<Model> mlp() {
  ModelSpec s;
  s.kind = ModelKind::mlp;
  s.hidden = {32, 16};
  return build_model(s, Shape{1, 8, 8}, 10);
}

}  // namespace

TEST(EmulatedBlock, KeepsTheRealLayoutAndShapesAndComputesNothing) {
  auto real = mlp();
  auto emulated = mlp();
  const std::vector<double> forward{0.002, 0.001, 0.001}, backward{0.004, 0.002, 0.002};
  emulated->emulate_compute(forward, backward, 16);
  ASSERT_TRUE(emulated->compute_emulated());
  EXPECT_EQ(emulated->flat().numel(), real->flat().numel());
  EXPECT_EQ(emulated->flat().entries().size(), real->flat().entries().size());
  EXPECT_EQ(emulated->block(1).param_specs().size(), real->block(1).param_specs().size());

  Tensor x = Tensor::zeros({32, 1, 8, 8});
  emulated->flat().grads().fill_zero();
  const double t0 = now_seconds();
  Tensor out = emulated->forward(x);
  const double t1 = now_seconds();
  EXPECT_EQ(out.shape(), (Shape{32, 10}));
  emulated->backward(out);
  const double t2 = now_seconds();
  // 32 samples against a profile of 16: twice the profiled times. The
  // forward's last wake-up came late by (t1 - t0) - 8 ms at most, which the
  // compute clock takes off the backward's first wait: the sum is what holds.
  EXPECT_GE(t1 - t0, 2 * 0.004);
  EXPECT_GE(t2 - t0, 2 * (0.004 + 0.008));
  for (int64_t i = 0; i < emulated->flat().numel(); ++i) ASSERT_EQ(emulated->flat().grads().f32()[i], 0.0f);
}

TEST(EmulatedBlock, AProfileThatDoesNotFitTheModelIsAnError) {
  auto m = mlp();
  try {
    m->emulate_compute({0.1}, {0.1}, 16);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the profile times 1 forward and 1 backward Blocks; this model has 3"),
              std::string::npos)
        << e.what();
  }
}

// Time between waits (a collective the rank waited for) is not taken off.
TEST(ComputeClock, TimeBetweenWaitsIsNotTakenOff) {
  ComputeClock clock;
  const double t0 = now_seconds();
  for (int i = 0; i < 20; ++i) {
    clock.run(200e-6);
    sleep_until(now_seconds() + 300e-6);  // the rank busy elsewhere
  }
  EXPECT_GE(now_seconds() - t0, 20 * 500e-6);
}

namespace {

// The fastest of 3 tries at `n` back-to-back waits of `seconds` on a fresh
// clock, so that a try the machine's load disturbed does not decide.
double best_of_three(int n, double seconds) {
  double best = 1e9;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ComputeClock clock;
    const double t0 = now_seconds();
    for (int i = 0; i < n; ++i) clock.run(seconds);
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

}  // namespace

// ("AreFast": timing tests, left out of the sanitizer builds.)
TEST(ComputeClock, LateWakeUpsDoNotAddUpSoBackToBackWaitsAreFast) {
  const double best = best_of_three(200, 100e-6);
  EXPECT_GE(best, 200 * 100e-6);
  // Each wake-up is late by the kernel's timer slack (50 us by default) or
  // more; taken off the next wait, 200 of them do not add 10 ms or more.
  EXPECT_LT(best, 200 * 100e-6 + 0.008) << "late wake-ups added up";
}

// An optimizer's per-tensor updates are waits of microseconds, shorter than
// one wake-up's lateness: the lateness they owe is passed on, not dropped.
TEST(ComputeClock, WaitsShorterThanAWakeUpAreFastToo) {
  const double best = best_of_three(400, 5e-6);
  EXPECT_GE(best, 400 * 5e-6);
  // Each a wake-up 50 us late or more, 400 waits would take 20 ms or more.
  EXPECT_LT(best, 400 * 5e-6 + 0.006) << "waits shorter than a wake-up's lateness each paid it";
}
