// The job's three phases after set-up (job.h): where training starts
// (resume), the loop over epochs and steps with its evaluations and
// checkpoints, and the end (result.json and the summary).
#pragma once

#include "runtime/train/job.h"
#include "runtime/train/run_telemetry.h"

#include <optional>
#include <string>

namespace shardtrain::train {

// Where the run is: what resume() restores and the loop moves on.
struct LoopState {
  int64_t step = 0, epoch = 0;
  // The sampler position of the next batch, as the loop moves it (not
  // derived from `step`: a resumed run may have another number of batches
  // per epoch than the run that wrote its checkpoint).
  int64_t next_epoch = 0, next_batch = 0;
  int64_t start_step = 0;                // where this process started
  std::string resumed_from;              // the checkpoint file, or ""
  std::optional<double> time_to_target;  // training seconds until the target was reached
  int64_t last_checkpoint = -1;          // the step of the newest checkpoint written or loaded
  int64_t trained_samples = 0;           // by this process
  double loss_sum = 0.0;                 // this rank's, since the last evaluation
  int64_t loss_samples = 0;
  std::optional<EvalResult> last_eval;
  int64_t last_eval_step = -1;
  std::string status = "completed";     // or "diverged", "preempted"
  double run_start = 0;                 // when training began (after set-up and resume)
  int64_t storage_bytes_at_start = -1;  // io::storage_read_bytes() then
};

// Collective. `resume` is TrainOptions::resume: "" (step 0), "auto" or a
// file. Loads the checkpoint into the job's strategy and optimizer, sets
// aside checkpoints newer than where the run starts, logs what it did.
LoopState resume(Job& job, const std::string& resume);

// Steps until the target, the steps or the epochs are done (or the loss is
// not finite), with an evaluation after every epoch and at the end, and the
// checkpoints due. On SIGTERM, SIGINT or SIGUSR1 (preemption) the loop
// stops after the same step on every rank (the one after the signal: the
// ranks agree one step late), with a checkpoint of it when checkpointing
// (or checkpoint.on_signal) is on: status "preempted".
void train(Job& job, LoopState& state, RunTelemetry& telemetry);

// Forward passes over the test split on every rank, then metrics.jsonl,
// the [eval] line and the target check.
void evaluate_and_log(Job& job, LoopState& state, RunTelemetry& telemetry);
// Collective: the checkpoint of state.step.
void save_checkpoint(Job& job, LoopState& state, RunTelemetry* telemetry);

// The exit status of a preempted run: BSD's EX_TEMPFAIL, "try again
// later", distinct from an error (1) and from being killed (128 + signal).
constexpr int kPreemptedExitCode = 75;

// Writes result.json and the [summary] and [done] lines; returns the exit
// code (0: completed, reached or not; 1: diverged; kPreemptedExitCode).
int finish(Job& job, const LoopState& state, RunTelemetry& telemetry, const MemoryPlan& plan);

}  // namespace shardtrain::train
