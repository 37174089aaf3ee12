// `shardtrain bench telemetry CONFIG`: what telemetry costs a training step.
// Alternates rounds of real training steps (timed_step, the trainer's own)
// with telemetry on (spans, step records, trace written to a scratch run
// directory) and off (telemetry.enabled = false: only the in-memory figures
// result.json needs), on one rank or, under mpirun, data parallel on all.
// Reports the median step time of each, the overhead (median over the paired
// rounds) and, more precisely than an A/B difference on a noisy machine can,
// the time telemetry's per-step work took as timed by itself
// (RunTelemetry::own_seconds).
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/train/config.h"

#include <string>

namespace shardtrain::train {

struct BenchTelemetryOptions {
  int steps = 64;   // steps per round
  int rounds = 12;  // rounds per setting, alternating; medians reported
  int warmup = 10;
  std::string json_path;
};

int bench_telemetry(const Config& config, const BenchTelemetryOptions& options, const comm::MpiEnv& mpi);

}  // namespace shardtrain::train
