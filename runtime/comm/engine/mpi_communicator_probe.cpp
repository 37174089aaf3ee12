// The world communicator's job-start probes (engine/algorithm_probe.h): its
// collectives with each algorithm forced in turn, on zeros (a sum of zeros
// stays zero, so the same buffers serve every run), timed on the caller's
// thread while nothing else is issued.
#include "runtime/comm/engine/algorithm_probe.h"
#include "runtime/comm/engine/mpi_communicator.h"

#include "runtime/core/error.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain::comm {

class MpiCommunicator::Prober final : public ProbeTarget {
 public:
  explicit Prober(MpiCommunicator& c) : c_(c) {}
  ~Prober() override { c_.probing_.reset(); }
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  std::vector<std::string> candidates(const std::string& op, int64_t bytes) const override {
    std::vector<std::string> out = {algo_name(Algo::mpi), algo_name(Algo::ring)};
    if (c_.shm_) out.emplace_back(algo_name(Algo::shm));
    if (op != "allreduce") {
      // One-shot stages the buffer twice (sent and received), which the
      // memory plan does not count: kept to sizes where latency rules.
      if (bytes <= kOneshotExchangeLimitBytes) out.emplace_back(algo_name(Algo::oneshot));
      return out;
    }
    // One-shot receives (ranks - 1) copies: kept where that stays small.
    if (bytes * (c_.size_ - 1) <= kOneshotLimitBytes) out.emplace_back(algo_name(Algo::oneshot));
    // As the thresholds: over nodes of one rank it is the ring with extra steps.
    if (c_.hierarchical_useful_) out.emplace_back(algo_name(Algo::hierarchical));
    return out;
  }

  void run(const std::string& op, const std::string& algorithm, int64_t bytes, int reps) override {
    c_.probing_ = algo_named(algorithm);
    ST_ASSERT(c_.probing_.has_value());  // candidates() names only algorithms
    const int64_t elems = std::max<int64_t>(bytes / 4 / c_.size_, 1) * c_.size_;
    if (!full_.defined() || full_.numel() != elems) {
      full_ = Tensor::zeros({elems});
      part_ = Tensor::zeros({elems / c_.size_});
    }
    for (int k = 0; k < reps; ++k) {
      WorkPtr w = op == "allreduce"        ? c_.allreduce(full_, ReduceOp::sum)
                  : op == "reduce_scatter" ? c_.reduce_scatter(full_, part_, ReduceOp::sum)
                                           : c_.allgather(part_, full_);
      w->wait();
    }
    c_.probing_.reset();
  }

  void barrier() override { check_mpi(MPI_Barrier(c_.comm_), "MPI_Barrier"); }
  double now() const override { return MPI_Wtime(); }
  void max_over_ranks(std::vector<double>& values) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_MAX, c_.comm_),
              "MPI_Allreduce");
  }

 private:
  static constexpr int64_t kOneshotLimitBytes = 16 << 20;
  static constexpr int64_t kOneshotExchangeLimitBytes = 256 << 10;

  MpiCommunicator& c_;
  Tensor full_, part_;
};

void MpiCommunicator::probe(const std::string& cache_path) {
  ProbeResult result{Tuning(fingerprint_)};
  {
    Prober prober(*this);
    result = probe_algorithms(fingerprint_, prober, options_.probe_budget_s);
  }
  // The probes' largest sizes grew the scratch areas beyond what the job's
  // own collectives may need (and `plan` counts): they grow again on demand.
  scratch_.release();
  std::string cached = "not cached (comm.tuning = \"probe\")";
  if (!cache_path.empty()) cached = "cached in " + cache_path;
  // A cache that cannot be written costs the next job its probes again, not
  // this job its start.
  if (!cache_path.empty() && rank_ == 0) {
    try {
      result.tuning.save(cache_path);
    } catch (const Error& e) {
      cached = fmt::format("not cached: {}", e.what());
    }
  }
  tuning_status_ = fmt::format(
      "algorithms probed at job start in {:.2f} s, {} B to {} B per collective (comm.probe_budget_s = {}), {}",
      result.seconds, kProbeFirstBytes, result.largest_bytes, options_.probe_budget_s, cached);
  tuning_ = std::move(result.tuning);
}

}  // namespace shardtrain::comm
