// train(), evaluate_and_log() and save_checkpoint() (train_loop.h).
#include "runtime/train/train_loop.h"

#include "runtime/core/clock.h"
#include "runtime/telemetry/flight_recorder.h"
#include "runtime/telemetry/recorder.h"
#include "runtime/train/progress.h"
#include "runtime/train/run_lines.h"
#include "runtime/train/timed_step.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <csignal>
#include <cstring>
#include <exception>

namespace shardtrain::train {
namespace {

bool reached(const Config::Target& t, const EvalResult& r) {
  if (!t.enabled()) return false;
  return t.metric == TargetMetric::test_accuracy ? r.accuracy >= t.value : r.loss <= t.value;
}

// Runs step `at`, moves the state past it; false when the loss is not
// finite (the run diverged).
bool run_step(Job& job, LoopState& state, RunTelemetry& telemetry, const StepPosition& at,
              const std::function<int64_t()>& stage_bytes, Progress& progress) {
  const Config& config = job.config;
  const float lr = job.schedule.at(state.step);
  const StepPhases phases = timed_step(config, job.s, job.sampler, job.buffers, telemetry, at, lr, *job.strategy,
                                       job.mpi.rank(), job.injected_comm_s, stage_bytes);
  ++state.step;
  const bool epoch_ends = at.batch + 1 == job.steps_per_epoch;
  state.next_epoch = epoch_ends ? at.epoch + 1 : at.epoch;
  state.next_batch = epoch_ends ? 0 : at.batch + 1;
  state.trained_samples += config.train.global_batch_size;
  const double loss = phases.loss_sum;
  // Every rank holds the same parameters after the update, but each sees
  // only its own loss: a rank whose loss is not finite stops the job.
  if (!std::isfinite(loss)) {
    state.status = "diverged";
    job.ctx.run.log(
        fmt::format("[train] training diverged at step {} (loss {}): lower optim.lr or set "
                    "optim.clip_grad_norm",
                    state.step, loss));
    if (job.mpi.world_size() > 1) throw Error(fmt::format("training diverged at step {} (loss {})", state.step, loss));
    return false;
  }
  const int64_t labels = job.sampler.local_batch() * job.buffers.tokens;  // the loss is per label: per token for gpt
  state.loss_sum += loss;
  state.loss_samples += labels;
  const double step_s = telemetry.step_seconds();
  const std::string line =
      progress.update(state.step, at.epoch, config.train.epochs, loss / double(labels), lr,
                      double(state.trained_samples) / step_s, step_s / double(state.step - state.start_step));
  if (!line.empty()) job.ctx.run.log(line);
  return true;
}

// Whether a rank received a stop signal (FlightRecorder::defer_signals),
// agreed over the ranks so that all stop after the same step. The agreement
// runs one step late: the all-reduce of each step's flag is issued after the
// step and waited for after the next one, by when it has long completed (a
// blocking one would add its latency to every step). Every rank sees the
// same sum, so every rank stops after the same step.
class StopAgreement {
 public:
  explicit StopAgreement(comm::Communicator* comm) : comm_(comm) {}
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;
  // The last one issued: every rank issued it, every rank completes it
  // (unless an error is unwinding: then the job ends without it).
  ~StopAgreement() {
    if (pending_ && std::uncaught_exceptions() == 0) pending_->wait();
  }

  // After every step (the same number of calls on every rank).
  bool after_step() {
    const float mine = telemetry::FlightRecorder::stop_signal() != 0 ? 1.0f : 0.0f;
    if (comm_ == nullptr) return mine > 0;
    bool stop = false;
    if (pending_) {
      pending_->wait();
      stop = flag_.f32()[0] > 0;
    }
    flag_.f32()[0] = mine;
    pending_ = comm_->allreduce(flag_, comm::ReduceOp::sum);
    return stop;
  }

 private:
  comm::Communicator* comm_;
  Tensor flag_ = Tensor::zeros({1});
  comm::WorkPtr pending_;
};

// Preemption: the checkpoint of this step (when checkpoints are written),
// then the one line that says what happened and what to do.
void stop_on_signal(Job& job, LoopState& state, RunTelemetry& telemetry) {
  state.status = "preempted";
  const int sig = telemetry::FlightRecorder::stop_signal();
  const std::string what = sig != 0 ? fmt::format("SIG{}", sigabbrev_np(sig)) : std::string("a signal to another rank");
  const bool write = job.checkpoints->enabled() || job.config.checkpoint.on_signal;
  if (write && state.last_checkpoint != state.step) save_checkpoint(job, state, &telemetry);
  const std::string outcome =
      write ? fmt::format("checkpoint of step {} in {}: `--resume auto` continues from it", state.step,
                          job.checkpoints->dir())
            : std::string("no checkpoint (checkpoint.every_steps = 0; checkpoint.on_signal = true writes one)");
  job.ctx.run.log(fmt::format("[preempted] {}: every rank stopped after step {} of {}; {}; exit status {}", what,
                              state.step, job.total_steps, outcome, kPreemptedExitCode));
}

}  // namespace

void train(Job& job, LoopState& state, RunTelemetry& telemetry) {
  const Config& config = job.config;
  telemetry::MlLog& mllog = job.ctx.mllog;
  std::atomic<int64_t>& live_step = *job.ctx.live_step;
  if (job.s.train_stream)
    job.s.train_stream->start({state.epoch, state.next_batch}, std::max<int64_t>(0, job.total_steps - state.step));
  const std::function<int64_t()> stage_bytes =
      job.staging.enabled() ? std::function<int64_t()>([&] { return job.staging.take_bytes(); }) : nullptr;
  Progress progress(job.total_steps, config.train.progress_every_s);
  StopAgreement stop(job.comm.get());
  bool checkpoint_after_eval = false;
  int64_t first_batch = state.next_batch;  // of the first epoch; the others start at 0
  for (; state.epoch < config.train.epochs && state.step < job.total_steps && !state.time_to_target; ++state.epoch) {
    mllog.start("epoch_start", nullptr, {{"epoch_num", state.epoch + 1}});
    for (int64_t b = std::exchange(first_batch, 0); b < job.steps_per_epoch && state.step < job.total_steps; ++b) {
      if (config.debug.kill_step == state.step && config.debug.slow_rank == job.mpi.rank()) std::raise(SIGKILL);
      live_step = state.step;
      if (!run_step(job, state, telemetry, {state.epoch, b, state.step, job.steps_per_epoch}, stage_bytes, progress))
        break;
      // A checkpoint due where the epoch (or the run) ends waits for the
      // evaluation that follows, so that it records it: a run resumed from
      // it neither skips that evaluation nor misses a target reached there.
      const bool mid_epoch = b + 1 < job.steps_per_epoch && state.step < job.total_steps;
      if (job.checkpoints->due(state.step)) {
        if (mid_epoch)
          save_checkpoint(job, state, &telemetry);
        else
          checkpoint_after_eval = true;
      }
      // At an epoch's end the evaluation runs first, as for a checkpoint.
      if (stop.after_step() && mid_epoch) return stop_on_signal(job, state, telemetry);
    }
    live_step = -1;
    if (state.status != "completed") return;
    if (job.s.computes()) evaluate_and_log(job, state, telemetry);
    if (std::exchange(checkpoint_after_eval, false)) save_checkpoint(job, state, &telemetry);
    mllog.end("epoch_stop", nullptr, {{"epoch_num", state.epoch + 1}});
    const bool more = state.epoch + 1 < config.train.epochs && state.step < job.total_steps && !state.time_to_target;
    if (more && stop.after_step()) return stop_on_signal(job, state, telemetry);
  }
  // `final` is evaluated at the end of every run, also one cut short by max_steps.
  if (state.last_eval_step != state.step && job.s.computes()) evaluate_and_log(job, state, telemetry);
  if (job.checkpoints->enabled() && state.last_checkpoint != state.step) save_checkpoint(job, state, &telemetry);
}

void evaluate_and_log(Job& job, LoopState& state, RunTelemetry& telemetry) {
  const Config& config = job.config;
  telemetry::MlLog& mllog = job.ctx.mllog;
  const double t_eval = now_seconds();
  const double ep = double(state.step) / double(job.steps_per_epoch);
  const int64_t epoch_num = int64_t(std::ceil(ep));
  mllog.start("eval_start", nullptr, {{"epoch_num", epoch_num}});
  EvalResult result;
  {
    telemetry::Span span("eval", "eval", state.step);
    // FSDP: each Block gathered for its forward, as in training.
    result = evaluate(*job.s.model, job.s.test_data, config.train.eval_batch_size, job.comm.get(), job.s.language_model,
                      job.strategy->eval_hooks());
    job.strategy->end_evaluation();  // its collectives are the evaluation's (eval_s), not the next step's
  }
  mllog.end("eval_stop", nullptr, {{"epoch_num", epoch_num}});
  mllog.event("eval_accuracy", result.accuracy, {{"epoch_num", epoch_num}});
  state.last_eval = result;
  state.last_eval_step = state.step;
  const std::vector<double> sums = job.comm ? sum_over_ranks(*job.comm, {state.loss_sum, double(state.loss_samples)})
                                            : std::vector<double>{state.loss_sum, double(state.loss_samples)};
  const double train_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
  const double step_s = telemetry.step_seconds();
  const double sps = step_s > 0 ? double(state.trained_samples) / step_s : 0.0;
  using nlohmann::json;
  job.ctx.run.append_metrics({{"epoch", ep},
                              {"step", state.step},
                              {"train_loss", sums[1] > 0 ? json(train_loss) : json(nullptr)},
                              {"test_loss", result.loss},
                              {"test_accuracy", result.accuracy},
                              {"samples_per_s", sps},
                              {"lr", job.schedule.at(std::max<int64_t>(0, state.step - 1))},
                              {"elapsed_s", now_seconds() - state.run_start}});
  job.ctx.run.log(eval_line(ep, state.step, train_loss, result, sps));
  state.loss_sum = 0.0;
  state.loss_samples = 0;
  if (!state.time_to_target && reached(config.target, result)) {
    state.time_to_target = now_seconds() - state.run_start;
    job.ctx.run.log(fmt::format("[eval] target {} reached at epoch {:.2f} (step {}) after {:.1f} s",
                                describe_target(config.target), ep, state.step, *state.time_to_target));
  }
  telemetry.add_eval(now_seconds() - t_eval);
}

void save_checkpoint(Job& job, LoopState& state, RunTelemetry* telemetry) {
  checkpoint::Progress at{state.step, state.next_epoch, state.next_batch, job.total_steps, 0};
  at.target_reached_ms = state.time_to_target ? int64_t(std::llround(*state.time_to_target * 1000.0)) : -1;
  const auto [path, seconds] = job.checkpoints->save(at, state.step);
  if (telemetry) telemetry->add_checkpoint(seconds);  // the step before carries a checkpoint's time
  state.last_checkpoint = state.step;
  job.ctx.run.log(fmt::format("[checkpoint] step {} written to {} in {:.2f} s", state.step, path, seconds));
}

}  // namespace shardtrain::train
