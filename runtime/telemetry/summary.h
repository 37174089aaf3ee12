// From per-step records to the run's summary: per rank (median and p95 step
// time, accelerator utilization, stall fractions, samples/s, I/O totals),
// across ranks (min, median, p95, max), and the straggler report.
//
// Summaries are computed at the end with one gather: each rank reduces its own
// records to a RankStats (fixed size, serializable as doubles), rank 0 gets
// them all and calls summarize().
#pragma once

#include "runtime/telemetry/step_record.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace shardtrain::telemetry {

struct RankStats {
  int rank = 0;
  int64_t steps = 0;
  double step_median_s = 0, step_p95_s = 0, step_mean_s = 0;
  double busy_median_s = 0;  // step time minus time blocked on other ranks
  // Medians of the components per step (their sum may differ from the median step).
  double compute_median_s = 0, data_wait_median_s = 0, comm_exposed_median_s = 0, blocked_on_peers_median_s = 0;
  // Median of data_wait + h2d per step: the "data" straggler cause.
  double data_median_s = 0;
  // Totals over the steps: fractions are total component / total step time.
  double au = 0;  // accelerator utilization: compute / step (DLIO)
  double data_wait_frac = 0, comm_exposed_frac = 0, blocked_on_peers_frac = 0;
  double comm_s = 0;  // total communication (overlapped or not)
  double samples_per_s = 0;
  double io_bytes = 0, io_requests = 0, io_read_s = 0;
  double mem_peak_bytes = 0, cpu_process_s = 0;  // host memory
  double mem_gpu_peak_bytes = 0;                 // the rank's GPU (0 without one)

  // A fixed-length vector (kPackedSize doubles) for one MPI gather.
  static constexpr size_t kPackedSize = 23;
  std::vector<double> pack() const;
  static RankStats unpack(const std::vector<double>& v);
};

// Percentiles (median, p95) are nearest-rank: the ceil(p * n)-th smallest
// value, always one of the samples (for two samples the median is the lower).
RankStats rank_stats(int rank, const std::vector<StepRecord>& records);

struct SummaryOptions {
  // A rank is a straggler when its median busy time exceeds the median over
  // ranks by more than this fraction.
  double straggler_threshold = 0.05;
  // Used for samples_per_s only when the records carry no sample counts:
  // global_batch / the median over ranks of the mean step time.
  int64_t global_batch = 0;
};

// summary.json's content (docs/telemetry.md): "per_rank", "across_ranks",
// "au_min", "au_median", "stragglers" (rank, cause: "data" | "communication" |
// "compute", excess), "samples_per_s", "io", ...
nlohmann::json summarize(const std::vector<RankStats>& ranks, const SummaryOptions& options);
// The printed summary (also summary.txt).
std::string summary_text(const nlohmann::json& summary);

}  // namespace shardtrain::telemetry
