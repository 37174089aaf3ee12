#include "runtime/train/run_context.h"

#include "runtime/core/clock.h"
#include "runtime/telemetry/flight_recorder.h"
#include "runtime/telemetry/recorder.h"
#include "runtime/train/blas_core.h"
#include "runtime/train/mlperf_fields.h"
#include "runtime/train/run_lines.h"
#include "runtime/train/run_telemetry.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>

namespace shardtrain::train {
namespace {

std::string run_directory(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi) {
  ST_CHECK(
      options.resume != "auto" || !options.run_dir.empty() || !config.run.dir.empty() || !config.checkpoint.dir.empty(),
      "--resume auto resumes the newest checkpoint of a run directory: name it with --run-dir (or set "
      "run.dir or checkpoint.dir); without one this run gets a new directory, which holds none");
  const std::string dir = !options.run_dir.empty()  ? options.run_dir
                          : !config.run.dir.empty() ? config.run.dir
                                                    : RunDir::default_path(config.source);
  return mpi.broadcast_string(dir, 0);  // rank 0's timestamp names the run
}

// Turns the span recorder on before anything records (a process-wide switch).
double start_recording(const Config& config) {
  if (config.telemetry.enabled) {
    telemetry::Recorder& recorder = telemetry::Recorder::instance();
    recorder.enable(size_t(config.telemetry.flight_spans), config.telemetry.trace);
    recorder.name_thread("train");
  }
  return now_seconds();
}

// A resumed run keeps the earlier run's telemetry under new names
// (set_aside_earlier_telemetry); the line that says so, or "".
std::string keep_earlier_telemetry(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi,
                                   const std::string& dir) {
  if (options.resume.empty() || !config.telemetry.enabled) return {};
  const std::string tag = mpi.broadcast_string(std::to_string(std::time(nullptr)), 0);
  const std::vector<std::string> moved = set_aside_earlier_telemetry(dir, mpi.rank(), tag);
  if (moved.empty()) return {};
  return fmt::format("[resume] the earlier run's telemetry kept as {}{}", moved.front(),
                     moved.size() > 1 ? fmt::format(" and {} more *.before-{}", moved.size() - 1, tag) : "");
}

}  // namespace

RunContext::RunContext(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi,
                       const std::string& strategy)
    : start_s(start_recording(config)),
      dir(run_directory(config, options, mpi)),
      run(dir, options.overwrite, mpi.rank() == 0, /*append=*/!options.resume.empty()),
      earlier_telemetry_(keep_earlier_telemetry(config, options, mpi, dir)),
      mllog(mpi.rank() == 0 && config.telemetry.enabled ? (std::filesystem::path(dir) / "mllog.txt").string()
                                                        : std::string()) {
  Config resolved = config;
  resolved.run.dir = dir;
  run.write_file("config.toml", to_toml(resolved));
  // There from the start: a job that dies without a word leaves "running"
  // (finish() replaces it; docs/reliability.md).
  run.write_file(
      "result.json",
      nlohmann::json{
          {"status", "running"}, {"config", config.source}, {"world_size", mpi.world_size()}, {"strategy", strategy}}
              .dump(2) +
          "\n");
  run.log(opening_line(mpi.world_size(), strategy, config.source, dir));
  for (const std::string& notice : config.notices) run.log("[init] notice: " + notice);
  if (const std::string note = blas_core_note(); !note.empty()) run.log("[init] " + note);
  if (!earlier_telemetry_.empty()) run.log(earlier_telemetry_);
  mllog.event("submission_benchmark", nn::model_name(config.model));
  mllog.start("init_start");
  mllog.event("seed", config.train.seed);
  mllog.event("global_batch_size", config.train.global_batch_size);
  mllog.event("opt_base_learning_rate", config.optim.lr);
  log_mlperf_fields(mllog, config, mpi.world_size());
  if (config.telemetry.enabled)
    telemetry::FlightRecorder::arm(dir, mpi.rank(), size_t(config.telemetry.flight_spans), [step = live_step] {
      const int64_t st = step->load();
      return st < 0 ? std::string("initializing or evaluating") : fmt::format("in step {}", st);
    });
}

}  // namespace shardtrain::train
