// `shardtrain bench comm --tune-algorithms`: for each collective and size, every
// algorithm the MPI backend can run here, timed side by side in latency mode
// (issue one, wait, repeat: what a training step's collectives see), and the
// fastest written into the tuning file of this topology (engine/tuning.h),
// which comm.tuning then follows. One communicator per algorithm (forced
// with CommOptions::allreduce_algorithm); a forced algorithm that cannot run
// here falls back to another, and the one that actually ran (Work::algorithm)
// is what is timed and kept.
#include "bench/commands/bench_comm.h"
#include "bench/commands/bench_comm_case.h"
#include "bench/commands/bench_stats.h"

#include "runtime/comm/engine/mpi_communicator.h"
#include "runtime/core/error.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

namespace shardtrain::comm {
namespace {

struct Candidate {
  std::string name;  // what was forced ("auto": the thresholds)
  std::unique_ptr<MpiCommunicator> comm;
};

// The thresholds first, then every algorithm forced, then the choice the
// job-start probes make (comm.tuning = "probe": what a job over several
// nodes without a tuning file follows), last.
std::vector<Candidate> candidates(const CommOptions& base) {
  std::vector<Candidate> out;
  using A = AllreduceAlgorithm;
  for (A a : {A::automatic, A::shm, A::oneshot, A::mpi, A::ring, A::hierarchical}) {
    CommOptions o = base;
    o.allreduce_algorithm = a;
    o.tuning = "off";
    try {
      out.push_back({std::string(name_of(a)), MpiCommunicator::make_world(o)});
    } catch (const Error& e) {
      // Not possible here (hierarchical over nodes of unequal sizes): every
      // rank raised the same error, so every rank leaves it out.
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0) fmt::print("bench comm: {} left out: {}\n", name_of(a), e.what());
    }
  }
  CommOptions o = base;
  o.allreduce_algorithm = A::automatic;
  o.tuning = "probe";
  out.push_back({"probed", MpiCommunicator::make_world(o)});
  return out;
}

// Seconds per operation of each algorithm that ran (median round), and of
// the thresholds' choice ("auto") and the probes' (the last candidate).
struct Timed {
  std::map<std::string, double> seconds;
  double by_size = 0, probed = 0;
  std::string by_size_ran, probed_ran;
  bool ok = true;
};

Timed time_candidates(cases::Case& c, std::vector<Candidate>& cs, const BenchCommOptions& options, MPI_Comm mpi) {
  Timed t;
  std::vector<std::string> ran(cs.size());
  int next = 0;
  auto run = [&](size_t i, int n) {
    c.use(*cs[i].comm);
    WorkPtr last;
    for (int k = 0; k < n; ++k) {
      last = c.run_shardtrain(next++);
      last->wait();
    }
    ran[i] = last->algorithm();
  };
  // Each algorithm's result on fresh inputs, then the timed runs on zeros.
  for (size_t i = 0; i < cs.size(); ++i) {
    c.fill(false);
    next = 0;
    run(i, 1);
    t.ok = t.ok && c.check(1);
  }
  c.fill(true);
  next = 0;
  for (int w = 0; w < options.warmup; ++w)
    for (size_t i = 0; i < cs.size(); ++i) run(i, 1);
  MPI_Barrier(mpi);
  const double t0 = MPI_Wtime();
  run(0, 1);
  const double one = cases::max_over_ranks(MPI_Wtime() - t0, mpi);
  const int iters = options.iters > 0 ? options.iters : int(std::clamp(0.05 / std::max(one, 1e-7), 1.0, 2000.0));
  std::vector<std::vector<double>> rounds(cs.size());
  for (int r = 0; r < options.rounds; ++r)
    for (size_t k = 0; k < cs.size(); ++k) {
      const size_t i = (k + size_t(r)) % cs.size();  // a different one first in each round
      MPI_Barrier(mpi);
      const double start = MPI_Wtime();
      run(i, iters);
      rounds[i].push_back(cases::max_over_ranks((MPI_Wtime() - start) / iters, mpi));
    }
  t.ok = cases::all_ranks(t.ok && c.check(next), mpi);
  for (size_t i = 0; i + 1 < cs.size(); ++i) {
    const double s = bench::median(rounds[i]);
    auto [it, fresh] = t.seconds.emplace(ran[i], s);
    if (!fresh) it->second = std::min(it->second, s);
  }
  t.by_size = bench::median(rounds.front());
  t.by_size_ran = ran.front();
  t.probed = bench::median(rounds.back());
  t.probed_ran = ran.back();
  return t;
}

}  // namespace

int bench_comm_tune(const BenchCommOptions& options) {
  const DType dtype = options.dtype == "bf16" ? DType::bf16 : DType::f32;
  std::vector<Candidate> cs = candidates(options.comm);
  MpiCommunicator& world = *cs.front().comm;
  MPI_Comm mpi;
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
  MpiNative native(mpi);
  Scratch scratch;
  const bool print = world.rank() == 0;
  const TopologyFingerprint& fp = world.fingerprint();
  const std::string path = options.tune_file.empty() ? cached_tuning_path(fp) : options.tune_file;
  if (print)
    fmt::print(
        "shardtrain bench comm --tune-algorithms: {} ranks on {} node(s) (topology {}), {}; every algorithm in latency "
        "mode, "
        "median of {} rounds; ratio: over the fastest\n{:<15}{:>11} | {:<13}{:>10} {:>5} | {:<13}{:>10} {:>5} | "
        "{:<13}{:>10} | {}\n",
        world.size(), fp.nodes, fp.key(), options.dtype, options.rounds, "op", "bytes", "by size", "time_us", "ratio",
        "probed", "time_us", "ratio", "fastest", "time_us", "every algorithm, us");
  std::vector<int64_t> sizes = options.sizes;
  if (sizes.empty())
    for (int64_t size = options.min_bytes; size <= options.max_bytes; size *= 2) sizes.push_back(size);
  Tuning tuning(fp);
  bool all_ok = true;
  for (const std::string& op : options.ops) {
    if (op == "broadcast") continue;  // always the MPI library's
    for (const int64_t size : sizes) {
      cases::Case c(op, size, cases::buffers_for(size), dtype, world, native, scratch);
      const Timed t = time_candidates(c, cs, options, mpi);
      all_ok = all_ok && t.ok;
      const auto best = std::min_element(t.seconds.begin(), t.seconds.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
      tuning.add(op, {c.bytes(), best->first, best->second});
      if (print) {
        std::string every;
        for (const auto& [name, s] : t.seconds) every += fmt::format("{} {:.1f}  ", name, s * 1e6);
        fmt::print("{:<15}{:>11} | {:<13}{:>10.1f} {:>5.2f} | {:<13}{:>10.1f} {:>5.2f} | {:<13}{:>10.1f} | {}{}\n", op,
                   c.bytes(), t.by_size_ran, t.by_size * 1e6, t.by_size / best->second, t.probed_ran, t.probed * 1e6,
                   t.probed / best->second, best->first, best->second * 1e6, every, t.ok ? "" : "WRONG");
        std::fflush(stdout);
      }
    }
  }
  if (print && all_ok) {
    tuning.save(path);
    fmt::print("wrote {}: comm.tuning = \"auto\" (the default) follows it on this topology\n", path);
  }
  if (print && !all_ok) fmt::print(stderr, "bench comm --tune-algorithms: some results were WRONG; nothing written\n");
  cs.clear();
  MPI_Comm_free(&mpi);
  return all_ok ? 0 : 1;
}

}  // namespace shardtrain::comm
