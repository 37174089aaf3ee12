// The job-start probes' decisions, on a target whose collectives cost what
// the test says (a clock advanced by each run): the fastest candidate per
// collective and size is kept, one slow round does not decide, the probes
// stop before a size that would pass the budget, and above the largest size
// probed each candidate's trend over its two largest sizes decides (never
// one-shot).
#include "runtime/comm/engine/algorithm_probe.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

using namespace shardtrain::comm;

namespace {

// A fake communicator: each operation takes cost(op, algorithm, bytes)
// seconds of its clock; `slow_once` adds a delay to one run.
class CostedTarget final : public ProbeTarget {
 public:
  using Cost = std::function<double(const std::string&, const std::string&, int64_t)>;
  explicit CostedTarget(Cost cost) : cost_(std::move(cost)) {}

  std::vector<std::string> candidates(const std::string& op, int64_t) const override {
    if (op == "allreduce") return {"mpi", "ring", "oneshot"};
    return {"mpi", "ring"};
  }
  void run(const std::string& op, const std::string& algorithm, int64_t bytes, int reps) override {
    ++runs_;
    if (runs_ == slow_run) clock_ += 1.0;
    clock_ += reps * cost_(op, algorithm, bytes);
    largest_ = std::max(largest_, bytes);
  }
  void barrier() override {}
  double now() const override { return clock_; }
  void max_over_ranks(std::vector<double>&) override {}

  int slow_run = -1;  // this run (1-based) takes a second longer
  int64_t largest_ = 0;

 private:
  Cost cost_;
  double clock_ = 0;
  int runs_ = 0;
};

TopologyFingerprint fp() { return {4, 2, 2, false, 0x1234abcdu}; }

// MPI's: 10 us + 1 GB/s; the ring: 50 us + 2 GB/s (crossover at 80 KB);
// one-shot: 2 us + 0.5 GB/s (all-reduce only: fastest at 4 KiB).
double cost(const std::string&, const std::string& algorithm, int64_t bytes) {
  if (algorithm == "mpi") return 10e-6 + double(bytes) / 1e9;
  if (algorithm == "ring") return 50e-6 + double(bytes) / 2e9;
  return 2e-6 + double(bytes) / 0.5e9;
}

}  // namespace

TEST(AlgorithmProbe, KeepsTheFastestCandidatePerCollectiveAndSize) {
  CostedTarget target(cost);
  const ProbeResult r = probe_algorithms(fp(), target, 100.0);
  EXPECT_EQ(r.largest_bytes, kProbeLastBytes);
  EXPECT_EQ(r.tuning.choose("allreduce", 4 << 10), "oneshot");
  EXPECT_EQ(r.tuning.choose("allreduce", 16 << 10), "mpi");
  EXPECT_EQ(r.tuning.choose("allreduce", 64 << 10), "mpi");
  EXPECT_EQ(r.tuning.choose("allreduce", 256 << 10), "ring");
  EXPECT_EQ(r.tuning.choose("reduce_scatter", 4 << 10), "mpi");
  EXPECT_EQ(r.tuning.choose("allgather", 16 << 20), "ring");
  // The time kept is the operation's, not the round's.
  const auto& rows = r.tuning.choices().at("allgather");
  EXPECT_NEAR(rows.back().seconds, cost("allgather", "ring", 16 << 20), 1e-9);
  EXPECT_EQ(r.tuning.choose("allreduce", 1 << 30), "ring");  // above the largest: extrapolated
}

TEST(AlgorithmProbe, AboveTheLargestSizeProbedOneShotIsNotExtrapolated) {
  // One-shot fastest at every size: it decides up to the largest size
  // probed, and the next fastest above it.
  CostedTarget target([](const std::string& op, const std::string& algorithm, int64_t bytes) {
    return algorithm == "oneshot" ? 1e-6 : cost(op, algorithm, bytes);
  });
  const ProbeResult r = probe_algorithms(fp(), target, 0.1);
  EXPECT_EQ(r.largest_bytes, 1 << 20);  // where the ring is ahead of MPI's
  EXPECT_EQ(r.tuning.choose("allreduce", r.largest_bytes), "oneshot");
  EXPECT_EQ(r.tuning.choose("allreduce", r.largest_bytes + 1), "ring");
}

TEST(AlgorithmProbe, OneSlowRoundDoesNotDecide) {
  CostedTarget target(cost);
  // Runs at 4 KiB: 3 warm-ups of the all-reduce's candidates, then round 0
  // (oneshot is third of three): its first timed run.
  target.slow_run = 6;
  const ProbeResult r = probe_algorithms(fp(), target, 100.0);
  EXPECT_EQ(r.tuning.choose("allreduce", 4 << 10), "oneshot");
  EXPECT_GT(r.seconds, 1.0);  // the slow run was timed
}

TEST(AlgorithmProbe, StopsBeforeASizeThatWouldPassTheBudget) {
  CostedTarget target(cost);
  // Up to 64 KiB every round takes about 1 ms of the fake clock (up to 16
  // operations); from 256 KiB rounds are down to 2 operations and a size
  // costs 4x the last. 100 ms fits 256 KiB (58 ms in all), not 1 MiB.
  const double budget = 0.1;
  const ProbeResult r = probe_algorithms(fp(), target, budget);
  EXPECT_LT(r.largest_bytes, kProbeLastBytes);
  EXPECT_EQ(r.largest_bytes, 256 << 10);
  EXPECT_LE(r.seconds, budget);
  EXPECT_EQ(target.largest_, r.largest_bytes);  // nothing larger ran
  EXPECT_EQ(r.tuning.applies_up_to(), r.largest_bytes);
}

TEST(AlgorithmProbe, AboveTheLargestSizeProbedTheTrendDecidesNotThatSizeAlone) {
  // A budget that stops at 64 KiB, just below MPI's and the ring's
  // crossover (80 KB): MPI is fastest there, but its cost per byte is twice
  // the ring's, so the ring is extrapolated to be fastest above.
  CostedTarget target(cost);
  const ProbeResult r = probe_algorithms(fp(), target, 0.05);
  ASSERT_EQ(r.largest_bytes, 64 << 10);
  EXPECT_EQ(r.tuning.choose("allgather", 64 << 10), "mpi");
  EXPECT_EQ(r.tuning.choose("allgather", 1 << 20), "ring");
  EXPECT_EQ(r.tuning.choose("allreduce", 1 << 20), "ring");
}
