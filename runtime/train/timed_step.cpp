#include "runtime/train/timed_step.h"

#include "runtime/core/error.h"
#include "runtime/train/lm_batch.h"
#include "runtime/telemetry/recorder.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace shardtrain::train {
namespace {

// [debug] fault injection: the slow rank sleeps `ms` in the phase it slows,
// under a span of its own so that the trace shows where the time went.
double inject(const Config& c, int rank, double ms, const char* what) {
  if (c.debug.slow_rank != rank || ms <= 0) return 0.0;
  telemetry::Span span(what, "debug");
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  return ms * 1e-3;
}

}  // namespace

StepPhases timed_step(const Config& config, Session& s, io::Sampler& sampler, StepBuffers& buffers,
                      RunTelemetry& telemetry, const StepPosition& at, float lr, parallel::Strategy& strategy, int rank,
                      double injected_comm_s, const std::function<int64_t()>& stage_bytes) {
  telemetry.begin_step(at.step, double(at.step) / double(at.steps_per_epoch));
  telemetry::Span step_span("step", "step", at.step);
  double injected = 0;
  {
    telemetry::Span span("data_wait", "data", at.step);
    buffers.next_input();  // GPU: the other input slot, so this batch's copy overlaps the last step
    if (s.train_stream) {
      const int64_t queued = s.train_stream->queued();
      const io::LoadedBatch& b = s.train_stream->next();
      ST_CHECK(b.epoch == at.epoch && b.batch == at.batch, "the loader delivered batch {}.{} for step {}.{}", b.epoch,
               b.batch, at.epoch, at.batch);
      if (s.language_model) {  // windows of T+1 token ids: x and the T next-token labels
        lm_batch_from_windows(b.raw.samples(), sampler.local_batch(), s.lm_tokens, buffers.x_host.i32(),
                              buffers.labels.data());
      } else if (!s.input_unread) {
        buffers.use_input(b.x);  // no copy: the step reads the loader's slot
        std::copy(b.y.begin(), b.y.end(), buffers.labels.begin());
      }
      telemetry.io_done(b.bytes, b.requests, b.read_s, queued, stage_bytes ? stage_bytes() : 0);
    } else {
      sampler.batch_indices(at.epoch, at.batch, buffers.indices);
      gather_batch(s, buffers, sampler.local_batch());
    }
    injected += inject(config, rank, config.debug.slow_data_ms, "debug slow_data");
  }
  telemetry.data_ready(sampler.local_batch());
  ST_CHECK(!(config.debug.slow_rank == rank && config.debug.fail_step == at.step),
           "debug.fail_step: injected failure on rank {} at step {}", rank, at.step);
  injected += inject(config, rank, config.debug.slow_compute_ms, "debug slow_compute");
  StepPhases phases;
  if (s.emulated) {  // the accelerator's time for this rank's share, nothing trained
    telemetry::Span span("emulated_compute", "compute", at.step);
    phases.forward_s = s.emulated->compute(sampler.local_batch());
  } else {
    phases = train_step(*s.model, *s.optimizer, buffers, lr, config.clip_grad_norm, config.train.global_batch_size,
                        config.train.accumulation_steps, strategy);
  }
  // slow_comm_ms is injected inside this rank's collectives (comm.debug_delay_s).
  telemetry.end_step(phases, strategy.take_stats(), injected + injected_comm_s);
  return phases;
}

}  // namespace shardtrain::train
