// One rank's records reduced to a RankStats: medians and p95 per step,
// fractions and utilization from totals (so long steps weigh more, as they do
// in the run's wall time), and the packing for the end-of-run gather.
#include "runtime/telemetry/summary.h"

#include "runtime/core/error.h"
#include "runtime/telemetry/percentile.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace shardtrain::telemetry {
namespace {

double median_of(const std::vector<StepRecord>& records, const std::function<double(const StepRecord&)>& f) {
  std::vector<double> v;
  v.reserve(records.size());
  for (const auto& r : records) v.push_back(f(r));
  return median(std::move(v));
}

double ratio(double num, double den) { return den > 0 ? num / den : 0; }

}  // namespace

RankStats rank_stats(int rank, const std::vector<StepRecord>& records) {
  RankStats s;
  s.rank = rank;
  s.steps = static_cast<int64_t>(records.size());
  if (records.empty()) return s;

  std::vector<double> steps;
  double step = 0, compute = 0, data_wait = 0, comm_exposed = 0, peers = 0, samples = 0;
  for (const auto& r : records) {
    steps.push_back(r.step_s);
    step += r.step_s;
    compute += r.compute_s();
    data_wait += r.data_wait_s;
    comm_exposed += r.comm_exposed_s;
    peers += r.blocked_on_peers_s;
    samples += static_cast<double>(r.samples);
    s.comm_s += r.comm_s;
    s.io_bytes += static_cast<double>(r.io_bytes);
    s.io_requests += static_cast<double>(r.io_requests);
    s.io_read_s += r.io_read_s;
    s.mem_peak_bytes = std::max(s.mem_peak_bytes, static_cast<double>(r.mem_cpu_peak_bytes));
    s.mem_gpu_peak_bytes = std::max(s.mem_gpu_peak_bytes, static_cast<double>(r.mem_gpu_peak_bytes));
    s.cpu_process_s += r.cpu_process_s;
  }
  s.step_median_s = percentile(steps, 0.5);
  s.step_p95_s = percentile(steps, 0.95);
  s.step_mean_s = step / static_cast<double>(records.size());
  s.busy_median_s = median_of(records, [](const StepRecord& r) { return r.busy_s(); });
  s.compute_median_s = median_of(records, [](const StepRecord& r) { return r.compute_s(); });
  s.data_wait_median_s = median_of(records, [](const StepRecord& r) { return r.data_wait_s; });
  s.comm_exposed_median_s = median_of(records, [](const StepRecord& r) { return r.comm_exposed_s; });
  s.blocked_on_peers_median_s = median_of(records, [](const StepRecord& r) { return r.blocked_on_peers_s; });
  s.data_median_s = median_of(records, [](const StepRecord& r) { return r.data_wait_s + r.h2d_s; });
  s.au = ratio(compute, step);
  s.data_wait_frac = ratio(data_wait, step);
  s.comm_exposed_frac = ratio(comm_exposed, step);
  s.blocked_on_peers_frac = ratio(peers, step);
  s.samples_per_s = ratio(samples, step);
  return s;
}

// The packed layout: rank, steps, then these fields in this order (pack and
// unpack both walk this one list, so they cannot disagree).
constexpr double RankStats::*kPackedFields[] = {
    &RankStats::step_median_s,         &RankStats::step_p95_s,
    &RankStats::step_mean_s,           &RankStats::busy_median_s,
    &RankStats::compute_median_s,      &RankStats::data_wait_median_s,
    &RankStats::comm_exposed_median_s, &RankStats::blocked_on_peers_median_s,
    &RankStats::data_median_s,         &RankStats::au,
    &RankStats::data_wait_frac,        &RankStats::comm_exposed_frac,
    &RankStats::blocked_on_peers_frac, &RankStats::comm_s,
    &RankStats::samples_per_s,         &RankStats::io_bytes,
    &RankStats::io_requests,           &RankStats::io_read_s,
    &RankStats::mem_peak_bytes,        &RankStats::cpu_process_s,
    &RankStats::mem_gpu_peak_bytes,
};
static_assert(2 + std::size(kPackedFields) == RankStats::kPackedSize);

std::vector<double> RankStats::pack() const {
  std::vector<double> v{static_cast<double>(rank), static_cast<double>(steps)};
  for (auto field : kPackedFields) v.push_back(this->*field);
  return v;
}

RankStats RankStats::unpack(const std::vector<double>& v) {
  ST_CHECK(v.size() == kPackedSize, "RankStats::unpack: {} values, expected {}", v.size(), kPackedSize);
  RankStats s;
  s.rank = static_cast<int>(v[0]);
  s.steps = static_cast<int64_t>(v[1]);
  size_t i = 2;
  for (auto field : kPackedFields) s.*field = v[i++];
  return s;
}

}  // namespace shardtrain::telemetry
