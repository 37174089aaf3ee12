// A run's place and voice, opened before anything else so that the user
// sees the run start: the run directory (its log, config.toml, metrics), the
// MLPerf log, and the flight recorder armed with what the rank is doing.
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/telemetry/mllog.h"
#include "runtime/train/config.h"
#include "runtime/train/run_dir.h"
#include "runtime/train/trainer.h"

#include <atomic>
#include <memory>
#include <string>

namespace shardtrain::train {

struct RunContext {
  // Collective: rank 0 names the directory (its timestamp). `strategy` is
  // the strategy's name for the opening line.
  RunContext(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi, const std::string& strategy);

  const double start_s;  // when the job started (init time is measured from here)
  const std::string dir;
  RunDir run;

 private:
  // A resumed run's earlier telemetry, renamed before the MLPerf log below
  // reopens mllog.txt: the line saying where it went, or "".
  std::string earlier_telemetry_;

 public:
  telemetry::MlLog mllog;
  // The step this rank is in, -1 while initializing or evaluating: read by
  // the flight recorder's thread, which stays armed after the job's stack
  // unwinds (main's error handler dumps it), hence shared.
  std::shared_ptr<std::atomic<int64_t>> live_step = std::make_shared<std::atomic<int64_t>>(-1);
};

}  // namespace shardtrain::train
