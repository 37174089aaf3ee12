// Every rank's RankStats to summary.json: per rank, across ranks, and the
// stragglers (docs/telemetry.md, "Definitions").
//
// Stragglers are found by busy time (step minus time blocked on other ranks):
// in a synchronous job every rank's wall step is the same, the slow rank's
// peers absorb its delay as blocked_on_peers. A straggler's cause is the
// component whose median exceeds the median over ranks by the most.
#include "runtime/telemetry/summary.h"

#include "runtime/telemetry/percentile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace shardtrain::telemetry {
namespace {

using nlohmann::json;

json rank_json(const RankStats& s) {
  return {{"rank", s.rank},
          {"steps", s.steps},
          {"step_time_median_s", s.step_median_s},
          {"step_time_p95_s", s.step_p95_s},
          {"step_time_mean_s", s.step_mean_s},
          {"busy_time_median_s", s.busy_median_s},
          {"au", s.au},
          {"data_wait_frac", s.data_wait_frac},
          {"comm_exposed_frac", s.comm_exposed_frac},
          {"blocked_on_peers_frac", s.blocked_on_peers_frac},
          {"compute_median_s", s.compute_median_s},
          {"data_wait_median_s", s.data_wait_median_s},
          {"comm_exposed_median_s", s.comm_exposed_median_s},
          {"comm_s", s.comm_s},
          {"samples_per_s", s.samples_per_s},
          {"io_bytes", std::llround(s.io_bytes)},
          {"io_requests", std::llround(s.io_requests)},
          {"io_read_s", s.io_read_s},
          {"mem_peak_bytes", std::llround(s.mem_peak_bytes)},
          {"mem_gpu_peak_bytes", std::llround(s.mem_gpu_peak_bytes)},
          {"cpu_process_s", s.cpu_process_s}};
}

std::vector<double> collect(const std::vector<RankStats>& ranks, double RankStats::*field) {
  std::vector<double> v;
  v.reserve(ranks.size());
  for (const auto& r : ranks) v.push_back(r.*field);
  return v;
}

json spread(const std::vector<double>& v) {
  if (v.empty()) return {{"min", 0.0}, {"median", 0.0}, {"p95", 0.0}, {"max", 0.0}};
  return {{"min", *std::min_element(v.begin(), v.end())},
          {"median", percentile(v, 0.5)},
          {"p95", percentile(v, 0.95)},
          {"max", *std::max_element(v.begin(), v.end())}};
}

struct Cause {
  const char* name;
  double RankStats::*median;
};
// In this order on ties: compute first, the common case.
constexpr std::array<Cause, 3> kCauses{{{"compute", &RankStats::compute_median_s},
                                        {"data", &RankStats::data_median_s},
                                        {"communication", &RankStats::comm_exposed_median_s}}};

json stragglers(const std::vector<RankStats>& active, double threshold) {
  json out = json::array();
  const double busy_ref = median(collect(active, &RankStats::busy_median_s));
  if (active.size() < 2 || busy_ref <= 0) return out;
  std::array<double, kCauses.size()> cause_ref{};
  for (size_t c = 0; c < kCauses.size(); ++c) cause_ref[c] = median(collect(active, kCauses[c].median));

  std::vector<std::pair<double, json>> found;
  for (const auto& r : active) {
    const double excess_frac = r.busy_median_s / busy_ref - 1;
    if (excess_frac <= threshold) continue;
    json excess_s = json::object();
    size_t cause = 0;
    double worst = -std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < kCauses.size(); ++c) {
      const double excess = r.*kCauses[c].median - cause_ref[c];
      if (excess > worst) {
        worst = excess;
        cause = c;
      }
      excess_s[kCauses[c].name] = std::max(0.0, excess);
    }
    found.emplace_back(excess_frac, json{{"rank", r.rank},
                                         {"cause", kCauses[cause].name},
                                         {"busy_time_median_s", r.busy_median_s},
                                         {"excess_frac", excess_frac},
                                         {"excess_s", std::move(excess_s)}});
  }
  // The worst first.
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace

json summarize(const std::vector<RankStats>& ranks_in, const SummaryOptions& options) {
  std::vector<RankStats> ranks = ranks_in;
  std::sort(ranks.begin(), ranks.end(), [](const RankStats& a, const RankStats& b) { return a.rank < b.rank; });
  // Ranks without steps (a rank that failed early) have no figures to compare.
  std::vector<RankStats> active;
  for (const auto& r : ranks)
    if (r.steps > 0) active.push_back(r);

  json per_rank = json::array();
  int64_t steps = 0;
  double samples_per_s = 0, io_bytes = 0, io_requests = 0, io_read_s = 0;
  for (const auto& r : ranks) {
    per_rank.push_back(rank_json(r));
    steps = std::max(steps, r.steps);
    samples_per_s += r.samples_per_s;
    io_bytes += r.io_bytes;
    io_requests += r.io_requests;
    io_read_s += r.io_read_s;
  }
  // Records without sample counts: every step moves one global batch.
  const double mean_step = median(collect(active, &RankStats::step_mean_s));
  if (samples_per_s == 0 && options.global_batch > 0 && mean_step > 0)
    samples_per_s = static_cast<double>(options.global_batch) / mean_step;

  const std::vector<double> au = collect(active, &RankStats::au);
  json across = {{"step_time_median_s", spread(collect(active, &RankStats::step_median_s))},
                 {"busy_time_median_s", spread(collect(active, &RankStats::busy_median_s))},
                 {"au", spread(au)},
                 {"data_wait_frac", spread(collect(active, &RankStats::data_wait_frac))},
                 {"comm_exposed_frac", spread(collect(active, &RankStats::comm_exposed_frac))},
                 {"blocked_on_peers_frac", spread(collect(active, &RankStats::blocked_on_peers_frac))}};

  return {{"ranks", ranks.size()},
          {"steps", steps},
          {"straggler_threshold", options.straggler_threshold},
          {"per_rank", std::move(per_rank)},
          {"across_ranks", std::move(across)},
          {"au_min", au.empty() ? 0.0 : *std::min_element(au.begin(), au.end())},
          {"au_median", median(au)},
          {"samples_per_s", samples_per_s},
          {"io", {{"bytes", std::llround(io_bytes)}, {"requests", std::llround(io_requests)}, {"read_s", io_read_s}}},
          {"stragglers", stragglers(active, options.straggler_threshold)}};
}

}  // namespace shardtrain::telemetry
