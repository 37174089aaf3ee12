// The optimizer's part of a step, timed and traced the same way by every
// strategy: an "optimizer" span (index: the bucket or Block it updates), its
// seconds added to the step's optimizer time.
#pragma once

#include "runtime/core/clock.h"
#include "runtime/telemetry/recorder.h"

#include <cstdint>

namespace shardtrain::parallel {

template <typename F>
void timed_optimizer(double& seconds, int64_t index, F&& update) {
  const double t0 = now_seconds();
  telemetry::Span span("optimizer", "compute", index);
  update();
  seconds += now_seconds() - t0;
}

}  // namespace shardtrain::parallel
