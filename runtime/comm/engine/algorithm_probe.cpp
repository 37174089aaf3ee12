#include "runtime/comm/engine/algorithm_probe.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace shardtrain::comm {
namespace {

constexpr size_t kRounds = 3;  // the best of three: a round the OS interrupted does not decide
// Operations back to back per round, as a step's collectives follow each
// other: enough that the slowest candidate's round takes about
// kRoundSeconds (small sizes: one operation is too short to time on a
// shared machine), at least kMinReps.
constexpr double kRoundSeconds = 1e-3;
constexpr int kMinReps = 2, kMaxReps = 16;
const char* const kOps[] = {"allreduce", "reduce_scatter", "allgather"};
const char* const kOneshot = "oneshot";

// Every candidate of every op at one size: the time of each of its rounds
// (the slowest rank's), then the time this size took, as the last value.
struct SizeTimes {
  std::vector<std::vector<std::string>> algorithms;  // per op
  std::vector<double> values;                        // per op and candidate, then the size's elapsed time
  int fewest_reps = kMaxReps;                        // over the ops
};

SizeTimes time_size(ProbeTarget& target, int64_t bytes) {
  SizeTimes t;
  const double start = target.now();
  for (const char* op : kOps) {
    std::vector<std::string> algorithms = target.candidates(op, bytes);
    std::vector<double> warmup{0};  // the slowest candidate's warm-up, agreed so that every rank runs as many
    for (const std::string& a : algorithms) {
      const double t0 = target.now();
      target.run(op, a, bytes, 1);
      warmup[0] = std::max(warmup[0], target.now() - t0);
    }
    target.max_over_ranks(warmup);
    const int reps = int(std::clamp(kRoundSeconds / std::max(warmup[0], 1e-9), double(kMinReps), double(kMaxReps)));
    t.fewest_reps = std::min(t.fewest_reps, reps);
    std::vector<double> rounds(algorithms.size() * kRounds);  // [candidate][round], seconds per operation
    for (size_t r = 0; r < kRounds; ++r)
      for (size_t k = 0; k < algorithms.size(); ++k) {
        const size_t i = (k + r) % algorithms.size();  // a different one first in each round
        target.barrier();
        const double t0 = target.now();
        target.run(op, algorithms[i], bytes, reps);
        rounds[i * kRounds + r] = (target.now() - t0) / reps;
      }
    t.values.insert(t.values.end(), rounds.begin(), rounds.end());
    t.algorithms.push_back(std::move(algorithms));
  }
  t.values.push_back(target.now() - start);
  target.max_over_ranks(t.values);  // each round's slowest rank, and the size's
  return t;
}

// Each candidate's best round at one size: seconds per operation.
std::map<std::string, double> best_rounds(const SizeTimes& t, size_t op, size_t& at) {
  std::map<std::string, double> best;
  for (size_t i = 0; i < t.algorithms[op].size(); ++i)
    best[t.algorithms[op][i]] = *std::min_element(t.values.begin() + std::ptrdiff_t(at + i * kRounds),
                                                  t.values.begin() + std::ptrdiff_t(at + (i + 1) * kRounds));
  at += t.algorithms[op].size() * kRounds;
  return best;
}

// Above the largest size probed: each candidate's time as latency + bytes /
// bandwidth through its two largest sizes, evaluated at kExtrapolateFactor
// times the largest; the fastest there (one size only: the fastest at it).
// Not the one-shot exchanges: they stage what they send and receive (the
// all-reduce's, (ranks - 1) copies), and were probed only while small.
constexpr int64_t kExtrapolateFactor = 16;
std::string beyond(const std::map<std::string, double>& before, int64_t before_bytes,
                   const std::map<std::string, double>& last, int64_t last_bytes) {
  std::string best;
  double best_s = std::numeric_limits<double>::infinity();
  for (const auto& [algorithm, t2] : last) {
    if (algorithm == kOneshot) continue;
    double predicted = t2;
    if (const auto it = before.find(algorithm); it != before.end() && before_bytes > 0) {
      const double per_byte = std::max(0.0, (t2 - it->second) / double(last_bytes - before_bytes));
      predicted = t2 + per_byte * double(last_bytes * (kExtrapolateFactor - 1));
    }
    if (predicted < best_s) {
      best = algorithm;
      best_s = predicted;
    }
  }
  return best;
}

}  // namespace

ProbeResult probe_algorithms(const TopologyFingerprint& fp, ProbeTarget& target, double budget_s) {
  ProbeResult result{Tuning(fp)};
  double last = 0, next_growth = 1;
  std::vector<std::map<std::string, double>> before(std::size(kOps)), at_last(std::size(kOps));
  int64_t before_bytes = 0;
  for (int64_t bytes = kProbeFirstBytes; bytes <= kProbeLastBytes; bytes *= kProbeStep) {
    // The next size's operations take up to kProbeStep times as long
    // (bandwidth-bound); while rounds of fewer operations make up for it, a
    // size costs about the same as the last.
    if (last > 0 && result.seconds + last * next_growth > budget_s) break;
    const SizeTimes t = time_size(target, bytes);
    next_growth = std::max(1.0, double(kProbeStep) * kMinReps / t.fewest_reps);
    size_t at = 0;
    for (size_t o = 0; o < t.algorithms.size(); ++o) {
      std::map<std::string, double> best = best_rounds(t, o, at);
      const auto fastest =
          std::min_element(best.begin(), best.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      if (fastest != best.end()) result.tuning.add(kOps[o], {bytes, fastest->first, fastest->second});
      before[o] = std::exchange(at_last[o], std::move(best));
    }
    before_bytes = result.largest_bytes;
    last = t.values.back();
    result.seconds += last;
    result.largest_bytes = bytes;
  }
  for (size_t o = 0; o < std::size(kOps); ++o)
    if (const std::string b = beyond(before[o], before_bytes, at_last[o], result.largest_bytes); !b.empty())
      result.tuning.set_beyond(kOps[o], b);
  result.tuning.apply_up_to(result.largest_bytes);
  return result;
}

}  // namespace shardtrain::comm
