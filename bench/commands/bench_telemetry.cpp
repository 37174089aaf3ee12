#include "bench/commands/bench_telemetry.h"

#include "bench/commands/bench_stats.h"

#include "io/sampler.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/clock.h"
#include "runtime/telemetry/recorder.h"
#include "runtime/train/timed_step.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace shardtrain::train {
namespace {

using bench::median;

}  // namespace

int bench_telemetry(const Config& config, const BenchTelemetryOptions& opt, const comm::MpiEnv& mpi) {
  ST_CHECK(opt.steps > 0 && opt.rounds > 0 && opt.warmup >= 0,
           "bench telemetry: --steps and --rounds must be positive");
  const int rank = mpi.rank(), world = mpi.world_size();
  Config in_memory = config;  // the step is measured with its data in memory
  in_memory.data.loader.mode = io::LoaderMode::memory;
  // Under mpirun: data parallel, as the trainer runs it, so that the
  // collectives' records and spans are part of what is measured.
  in_memory.parallel.strategy = world > 1 ? "ddp" : "none";
  Session s = make_session(in_memory);
  std::unique_ptr<comm::Communicator> comm;
  if (world > 1) comm = comm::make_mpi_world_communicator(config.comm);
  const std::unique_ptr<parallel::Strategy> strategy =
      parallel::make_strategy_spec(in_memory.parallel)->start(*s.model, comm.get());
  strategy->broadcast_parameters();
  make_optimizer(s, in_memory, *strategy);
  io::Sampler sampler(s.train_data.size(), config.train.global_batch_size, rank, world, uint64_t(config.train.seed));
  StepBuffers buffers = make_step_buffers(s, sampler.local_batch());
  // One scratch run directory for all ranks (rank 0 merges their traces).
  const std::string scratch = mpi.broadcast_string(
      (std::filesystem::temp_directory_path() / fmt::format("shardtrain-bench-telemetry-{}", ::getpid())).string(), 0);
  Config on = config, off = config;
  on.telemetry.enabled = true;
  off.telemetry.enabled = false;
  telemetry::Recorder& recorder = telemetry::Recorder::instance();
  recorder.name_thread("train");

  int64_t step = 0;
  const int64_t per_epoch = sampler.batches_per_epoch();
  // Returns the mean step time of the round; the end-of-run work (summary,
  // trace merge), paid once per run whatever its length, goes to `finish_s`.
  std::vector<double> finish_on, own_on;
  auto round = [&](const Config& c, int steps) {
    if (c.telemetry.enabled)
      recorder.enable(size_t(c.telemetry.flight_spans), c.telemetry.trace);
    else
      recorder.disable();
    const double t0 = now_seconds();
    RunTelemetry tel(c, scratch, rank, world, comm.get(), t0);
    for (int i = 0; i < steps; ++i, ++step)
      timed_step(c, s, sampler, buffers, tel, {step / per_epoch, step % per_epoch, step, per_epoch}, config.optim.lr,
                 *strategy, rank, 0.0);
    tel.flush();  // the round's last records and spans: per-step work, timed with the steps
    const double t1 = now_seconds();
    if (c.telemetry.enabled) own_on.push_back(tel.own_seconds() / steps);
    nlohmann::json ignored;
    tel.finish(ignored);
    if (c.telemetry.enabled) finish_on.push_back(now_seconds() - t1);
    return (t1 - t0) / steps;
  };

  round(off, opt.warmup);
  std::vector<double> t_on, t_off;
  for (int r = 0; r < opt.rounds; ++r) {
    t_on.push_back(round(on, opt.steps));
    t_off.push_back(round(off, opt.steps));
  }
  recorder.disable();
  if (comm) comm->barrier()->wait();  // every rank is done with the scratch directory
  if (rank != 0) return 0;
  std::filesystem::remove_all(scratch);
  const double m_on = median(t_on), m_off = median(t_off);
  // Rounds are paired (on, then off, back to back), so that drift in the
  // machine's speed cancels in each pair's difference.
  std::vector<double> paired;
  paired.reserve(t_on.size());
  for (size_t i = 0; i < t_on.size(); ++i) paired.push_back((t_on[i] - t_off[i]) / t_off[i]);
  const double overhead = median(paired);
  const double own = median(own_on);
  auto in_ms = [](std::vector<double> v) {
    for (double& x : v) x *= 1e3;
    return v;
  };
  fmt::print(
      "bench telemetry: {} (model {}, global batch {}, {}), {} rounds x {} steps per setting, "
      "alternating; figures of rank 0\n",
      config.source, nn::model_name(config.model), config.train.global_batch_size,
      world > 1 ? fmt::format("ddp on {} ranks", world) : std::string("1 rank"), opt.rounds, opt.steps);
  fmt::print("  step with telemetry off   {:8.3f} ms   (rounds, ms: {:.3f})\n", m_off * 1e3,
             fmt::join(in_ms(t_off), " "));
  fmt::print("  step with telemetry on    {:8.3f} ms   (rounds, ms: {:.3f})\n", m_on * 1e3,
             fmt::join(in_ms(t_on), " "));
  std::sort(paired.begin(), paired.end());
  const double q1 = paired[paired.size() / 4], q3 = paired[(3 * paired.size()) / 4];
  fmt::print(
      "  overhead, on vs off       {:+8.2f} %   (median of the paired rounds; the middle half {:+.2f} to {:+.2f} %:"
      " the machine's noise)\n",
      100 * overhead, 100 * q1, 100 * q3);
  fmt::print(
      "  telemetry's own work      {:8.1f} us   per step = {:.2f} % of the step (timed inside: records,"
      " trace file)\n",
      own * 1e6, 100 * own / m_off);
  fmt::print("  end of run, once          {:8.3f} ms   (summary, trace merge, after {} steps)\n",
             median(finish_on) * 1e3, opt.steps);
  if (!opt.json_path.empty()) {
    std::ofstream(opt.json_path) << nlohmann::json{{"config", config.source},
                                                   {"step_s_off", m_off},
                                                   {"step_s_on", m_on},
                                                   {"overhead", overhead},
                                                   {"overhead_quartiles", {q1, q3}},
                                                   {"own_s_per_step", own},
                                                   {"finish_s", median(finish_on)},
                                                   {"rounds_off_s", t_off},
                                                   {"rounds_on_s", t_on}}
                                        .dump(2)
                                 << "\n";
  }
  return 0;
}

}  // namespace shardtrain::train
