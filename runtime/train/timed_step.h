// One training step exactly as the trainer runs it, with its telemetry: the
// batch from the sampler (the data wait), [debug] fault injection, the
// train_step, and the step record. The trainer and `bench telemetry` both
// call it, so the overhead benchmark measures the real step.
#pragma once

#include "io/sampler.h"
#include "runtime/train/config.h"
#include "runtime/train/run_telemetry.h"
#include "runtime/train/session.h"

#include <functional>

namespace shardtrain::train {

struct StepPosition {
  int64_t epoch = 0, batch = 0;  // batch within the epoch
  int64_t step = 0;              // global step, 0-based
  int64_t steps_per_epoch = 1;
};

// `injected_comm_s`: the debug.slow_comm_ms this rank's collectives are
// slowed by per step (0 on other ranks), for the record. `stage_bytes`
// (optional): bytes the cache stager copied since it was last asked.
StepPhases timed_step(const Config& config, Session& session, io::Sampler& sampler, StepBuffers& buffers,
                      RunTelemetry& telemetry, const StepPosition& at, float lr, parallel::Strategy& strategy, int rank,
                      double injected_comm_s, const std::function<int64_t()>& stage_bytes = {});

}  // namespace shardtrain::train
