#include "runtime/train/trainer.h"

#include "io/memory_limit.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/core/allocator.h"
#include "runtime/core/clock.h"
#include "runtime/telemetry/flight_recorder.h"
#include "runtime/train/fatal_error.h"
#include "runtime/train/job.h"
#include "runtime/train/object_store_splits.h"
#include "runtime/train/run_context.h"
#include "runtime/train/run_lines.h"
#include "runtime/train/train_loop.h"

#include "kernels/cpu/gemm.h"

#include <nlohmann/json.hpp>

namespace shardtrain::train {
namespace {

// result.json of a run that ended with an error.
std::string failed_result(const std::string& error, int64_t step, const std::string& strategy) {
  return nlohmann::json{{"status", "failed"}, {"error", error}, {"steps", step}, {"strategy", strategy}}.dump(2);
}

}  // namespace

int run_training(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi) {
  keep_freed_host_memory();  // as the shardtrain program does, for a program of a user's own
  std::unique_ptr<parallel::StrategySpec> spec = parallel::make_strategy_spec(config.parallel);
  spec->check({mpi.world_size(), 1});
  const std::string strategy = spec->name();

  // Preemption: a signal from here on, set-up included, stops the loop after
  // a step, on every rank (train_loop.h); past the grace the flight recorder
  // ends the job.
  telemetry::FlightRecorder::defer_signals(
      config.checkpoint.signal_grace_s,
      fmt::format("the job did not stop within checkpoint.signal_grace_s = {} s of the signal (its set-up, its "
                  "step or its checkpoint did not finish): ended without them; `--resume auto` continues from the "
                  "newest complete checkpoint",
                  config.checkpoint.signal_grace_s));

  // Set-up: the run directory first (the user sees the run start), then the
  // data, the model, the communicators, the strategy and its optimizer.
  RunContext ctx(config, options, mpi, strategy);
  const Config local = fetch_object_store_splits(config, mpi, ctx.run);
  Job job(local, ctx, mpi, std::move(spec));

  // Where training starts: a checkpoint's position, or step 0.
  LoopState state = resume(job, options.resume);
  ReadyFigures ready;
  ready.optimizer = job.s.optimizer->name();
  ready.global_batch = config.train.global_batch_size;
  ready.world = mpi.world_size();
  ready.micro_batches = config.train.accumulation_steps;
  ready.steps_per_epoch = job.steps_per_epoch;
  ready.total_steps = job.total_steps;
  ready.blas_threads = cpu::blas_threads();
  ready.seconds = now_seconds() - ctx.start_s;
  ctx.run.log(ready_line(ready, config.target));

  // The memory this rank will hold at its peak, predicted (memory_plan.h)
  // and, from here on, measured: the allocator's high-water mark.
  const MemoryPlan plan = job.memory_plan();
  reset_high_water(Device::cpu());
  if (!job.s.device.is_cpu()) reset_high_water(job.s.device);
  ctx.mllog.end("init_stop");
  ctx.mllog.start("run_start");
  state.run_start = now_seconds();
  state.storage_bytes_at_start = io::storage_read_bytes();
  RunTelemetry telemetry(config, ctx.dir, mpi.rank(), mpi.world_size(), job.comm.get(), state.run_start);
  telemetry.set_device(job.s.device);
  if (!job.fabric.report.is_null()) telemetry.set_fabric(job.fabric.report, job.fabric.text);
  if (!job.nodes.report.is_null()) telemetry.set_doctor(job.nodes.report, job.nodes.line);

  // Errors from here on are this rank's alone (the others are in a step or
  // an evaluation): end the job before unwinding (runtime/train/fatal_error.h).
  try {
    train(job, state, telemetry);
  } catch (const std::exception& e) {
    // result.json says what ended the run (when rank 0 can still write it).
    try {
      ctx.run.write_file("result.json", failed_result(e.what(), state.step, strategy) + "\n");
    } catch (const std::exception&) {  // ignored: the error that ends the job is e, reported below
    }
    // An error every rank raised together (a checkpoint on a full disk) is
    // said once, by rank 0, and the others wait for it and for result.json,
    // which an abort from another rank would cut short.
    if (const auto* agreed = dynamic_cast<const comm::AgreedError*>(&e);
        agreed != nullptr && agreed->whole_world() && mpi.world_size() > 1) {
      if (mpi.rank() == 0) say_fatal_error(e, 0, mpi.world_size());
      MPI_Barrier(MPI_COMM_WORLD);
      report_fatal_error(e, mpi.rank(), mpi.world_size(), /*say=*/false);
    }
    if (mpi.world_size() > 1) report_fatal_error(e, mpi.rank(), mpi.world_size());
    throw;
  }
  return finish(job, state, telemetry, plan);
}

}  // namespace shardtrain::train
