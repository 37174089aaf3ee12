// Probes at job start: where no tuning file was measured for this topology
// (engine/tuning.h), a world over several nodes times its candidate
// algorithms of each collective at a few sizes, 4 KiB and every 4x up to 16
// MiB, before the first step, and follows the fastest. The thresholds were
// measured on one host; across nodes they were up to 2.9x slower than the
// best algorithm at some sizes (docs/BENCHMARKS.md).
//
// Each candidate runs once to warm up, then in three rounds (a different
// one first in each) of back-to-back operations after a barrier, 2 to 16 of
// them (about 1 ms for the slowest candidate): a collective as a step sees
// it. A candidate's time is its best round, the slowest rank's.
//
// The probes stop before a size whose estimate would pass the budget: the
// last size's time, times the size ratio once rounds are down to their
// fewest operations. Up to the largest size probed, a size takes the
// algorithm of the nearest size probed. Above it, each candidate's time is
// extrapolated as latency + bytes / bandwidth through its two largest sizes
// to 16x the largest, and the fastest there decides: near a crossover the
// largest size alone would pick by noise. The one-shot exchanges are left out
// there (they stage what they move, and are probed only while small). Every decision uses
// times agreed over the ranks, so every rank stops at the same size and
// picks the same algorithms.
#pragma once

#include "runtime/comm/engine/tuning.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::comm {

// What the probes run on: a communicator with its algorithms forced one at
// a time. Every call is collective over its ranks.
class ProbeTarget {
 public:
  virtual ~ProbeTarget() = default;
  // The algorithms that can run `op` ("allreduce", "reduce_scatter",
  // "allgather") of `bytes` here, the same on every rank.
  virtual std::vector<std::string> candidates(const std::string& op, int64_t bytes) const = 0;
  // `reps` operations `op` of `bytes` with `algorithm`, each waited for.
  virtual void run(const std::string& op, const std::string& algorithm, int64_t bytes, int reps) = 0;
  virtual void barrier() = 0;
  virtual double now() const = 0;  // seconds
  // Each value replaced by its maximum over the ranks.
  virtual void max_over_ranks(std::vector<double>& values) = 0;
};

struct ProbeResult {
  Tuning tuning;
  double seconds = 0;         // the probes' time (the slowest rank's)
  int64_t largest_bytes = 0;  // the largest size probed (0: none fit the budget)
};

constexpr int64_t kProbeFirstBytes = 4 << 10;
constexpr int64_t kProbeLastBytes = 16 << 20;
constexpr int64_t kProbeStep = 4;

ProbeResult probe_algorithms(const TopologyFingerprint& fp, ProbeTarget& target, double budget_s);

}  // namespace shardtrain::comm
