#include "runtime/train/trainer.h"

#include "io/sampler.h"
#include "runtime/comm/progress_engine.h"
#include "kernels/cpu/gemm.h"
#include "kernels/devices.h"
#include "runtime/core/clock.h"
#include "runtime/optim/schedule.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/train/checkpointing.h"
#include "runtime/train/blas_core.h"
#include "runtime/train/comm_volume.h"
#include "runtime/train/fatal_error.h"
#include "runtime/train/gradient_comm.h"
#include "runtime/train/memory_plan.h"
#include "runtime/train/progress.h"
#include "runtime/train/run_dir.h"
#include "runtime/train/session.h"
#include "runtime/train/staging.h"
#include "runtime/telemetry/flight_recorder.h"
#include "runtime/telemetry/mllog.h"
#include "runtime/telemetry/recorder.h"
#include "runtime/train/run_telemetry.h"
#include "runtime/train/timed_step.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>

namespace shardtrain::train {
namespace {

using nlohmann::json;

bool reached(const Config::Target& t, const EvalResult& r) {
  if (!t.enabled()) return false;
  return t.metric == "test_accuracy" ? r.accuracy >= t.value : r.loss <= t.value;
}

std::string describe_target(const Config::Target& t) {
  if (!t.enabled()) return "none";
  return t.metric == "test_accuracy" ? fmt::format("test_accuracy >= {:.2f}%", 100 * t.value)
                                     : fmt::format("test_loss <= {:.4f}", t.value);
}

}  // namespace

int run_training(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi) {
  const std::unique_ptr<parallel::StrategySpec> spec = parallel::make_strategy_spec(config.parallel);
  const std::string strategy = spec->name();
  spec->check({mpi.world_size(), 1});
  const double init_start = now_seconds();
  telemetry::Recorder& recorder = telemetry::Recorder::instance();
  if (config.telemetry.enabled) {
    recorder.enable(size_t(config.telemetry.flight_spans), config.telemetry.trace);
    recorder.name_thread("train");
  }

  // ---- init: run directory, communicator, data, model, optimizer ----------
  ST_CHECK(options.resume != "auto" || !options.run_dir.empty() || !config.run.dir.empty() ||
               !config.checkpoint.dir.empty(),
           "--resume auto resumes the newest checkpoint of a run directory: name it with --run-dir (or set "
           "run.dir or checkpoint.dir); without one this run gets a new directory, which holds none");
  std::string dir = !options.run_dir.empty() ? options.run_dir
                    : !config.run.dir.empty() ? config.run.dir
                                              : RunDir::default_path(config.source);
  dir = mpi.broadcast_string(dir, 0);  // rank 0's timestamp names the run
  RunDir run(dir, options.overwrite, mpi.rank() == 0, /*append=*/!options.resume.empty());
  Config resolved = config;
  resolved.run.dir = dir;
  run.write_file("config.toml", to_toml(resolved));
  run.log(fmt::format("[init] shardtrain {} on {} rank(s), strategy {}; config {}; run dir {}",
                      "0.1.0", mpi.world_size(), strategy, config.source, dir));
  if (const std::string note = blas_core_note(); !note.empty()) run.log("[init] " + note);
  if (!options.resume.empty() && config.telemetry.enabled) {
    const std::string tag = mpi.broadcast_string(std::to_string(std::time(nullptr)), 0);
    const std::vector<std::string> moved = set_aside_earlier_telemetry(dir, mpi.rank(), tag);
    if (!moved.empty())
      run.log(fmt::format("[resume] the earlier run's telemetry kept as {}{}", moved.front(),
                          moved.size() > 1 ? fmt::format(" and {} more *.before-{}", moved.size() - 1, tag) : ""));
  }
  telemetry::MlLog mllog(mpi.rank() == 0 && config.telemetry.enabled
                             ? (std::filesystem::path(dir) / "mllog.txt").string()
                             : std::string());
  mllog.event("submission_benchmark", config.model.kind);
  mllog.start("init_start");
  mllog.event("seed", config.train.seed);
  mllog.event("global_batch_size", config.train.global_batch_size);
  mllog.event("opt_base_learning_rate", config.optim.lr);
  // What the flight recorder says this rank was doing (read from its thread).
  // Shared with the recorder's context: the recorder stays armed after this
  // function returns or throws (main's error handler dumps it), so the
  // context must not point into this stack frame.
  const auto live_step_shared = std::make_shared<std::atomic<int64_t>>(-1);
  std::atomic<int64_t>& live_step = *live_step_shared;
  if (config.telemetry.enabled)
    telemetry::FlightRecorder::arm(dir, mpi.rank(), size_t(config.telemetry.flight_spans), [live_step_shared] {
      const int64_t st = live_step_shared->load();
      return st < 0 ? std::string("initializing or evaluating") : fmt::format("in step {}", st);
    });

  Staging staging(config, mpi.local_rank());
  Session s = make_session(config, staging.locator(), mpi.local_rank());
  nn::Model& model = *s.model;
  if (!s.device.is_cpu())
    run.log(fmt::format("[init] device: rank 0 on {} ({}), GEMMs in {}; batches copied from pinned host memory",
                        s.device.str(), cuda_devices()[size_t(s.device.index)].name, config.runtime.gpu_gemm));
  std::unique_ptr<comm::Communicator> comm;         // MPI: host tensors (evaluation sums, telemetry)
  std::unique_ptr<comm::Communicator> device_comm;  // GPU tensors (runtime.device = "cuda")
  comm::Communicator* grad_comm = nullptr;          // where gradients travel
  FabricInfo fabric;                                // what NCCL reported (rank 0), for the summary
  double injected_comm_s = 0;                       // debug.slow_comm_ms on this rank, per step
  if (spec->communicates()) {
    comm::CommOptions comm_options = config.comm;
    if (config.debug.slow_rank == mpi.rank() && config.debug.slow_comm_ms > 0) {
      // Spread the per-step delay over the step's collectives.
      comm_options.debug_delay_s = config.debug.slow_comm_ms * 1e-3 /
                                   double(spec->collectives_per_step(model.flat(), int(config.train.accumulation_steps)));
      injected_comm_s = config.debug.slow_comm_ms * 1e-3;
    }
    comm = comm::make_mpi_world_communicator(comm_options);
    grad_comm = comm.get();
    if (!s.device.is_cpu()) {
      device_comm = make_gradient_communicator(*comm, comm_options, s.device, run, &fabric);
      grad_comm = device_comm.get();
    }
  }
  const parallel::Topology topology{mpi.world_size(), comm ? comm->node().size() : 1};
  const parallel::PlanInputs plan_in = plan_inputs(config, topology);
  const std::unique_ptr<parallel::Strategy> strat = spec->start(model, grad_comm);
  strat->broadcast_parameters();
  make_optimizer(s, config, *strat);
  const io::DatasetInfo& info = s.train_info();
  mllog.event("train_samples", s.train_size());
  mllog.event("eval_samples", s.test_data.size());
  run.log(fmt::format("[init] data: train {} samples, test {} samples, sample shape {}, {} classes",
                      s.train_size(), s.test_data.size(), info.sample_shape.str(), info.num_classes));
  if (s.train_stream)
    run.log(fmt::format("[init] data: streaming {} shard(s) from {} with parallel HDF5, {} transfer, {} "
                        "batch(es) prefetched{}",
                        info.shard_files.size(), config.data.train, config.data.loader.transfer,
                        config.data.loader.prefetch_batches,
                        config.data.loader.cold_cache ? ", cold cache (pages dropped after reading)" : ""));
  run.log(fmt::format("[init] model {} ({} blocks):\n{}", config.model.kind, model.num_blocks(),
                      model.summary()));
  if (const std::string line = strat->describe(plan_in); !line.empty()) run.log("[init] " + line);

  // The same sampler as the streaming loader's (whose thread draws from its
  // own copy), with data.order and data.last_batch.
  io::Sampler sampler(s.train_size(), config.train.global_batch_size, mpi.rank(), mpi.world_size(),
                      uint64_t(config.train.seed), io::sampler_options(config.data.loader, info.shard_sizes));
  const int64_t micro_batches = config.train.accumulation_steps;
  // Checked against the smallest rank's share, the same answer on every
  // rank: a rank that alone refused would leave the others waiting in their
  // first collective (a hang until comm.timeout_s, with this message lost).
  const int64_t smallest_share = config.train.global_batch_size / mpi.world_size();
  ST_CHECK(smallest_share >= micro_batches,
           "train.accumulation_steps = {} exceeds the {} samples per step of the smallest rank's share (global "
           "batch {} over {} ranks)",
           micro_batches, smallest_share, config.train.global_batch_size, mpi.world_size());
  const int64_t steps_per_epoch = sampler.batches_per_epoch();
  int64_t total_steps = steps_per_epoch * config.train.epochs;
  if (config.train.max_steps > 0) total_steps = std::min(total_steps, config.train.max_steps);
  const optim::LrSchedule schedule(config.schedule, config.optim.lr, total_steps);
  Checkpointing checkpoints(config, dir, s, *strat, strategy, mpi.rank(), mpi.world_size());
  int64_t step = 0, epoch = 0, first_batch = 0;  // where training starts: 0, or the checkpoint's position
  std::string resumed_from;
  std::optional<double> time_to_target;  // training seconds until the target was reached
  int64_t last_checkpoint = -1;
  if (!options.resume.empty()) {
    // Rank 0 picks the file, so that every rank loads the same one.
    const std::string path = mpi.broadcast_string(checkpoints.resolve(options.resume).value_or(""), 0);
    if (path.empty()) {
      run.log(fmt::format("[resume] no complete checkpoint in {}: starting from step 0", checkpoints.dir()));
    } else {
      const double t0 = now_seconds();
      const checkpoint::Header h = checkpoints.load(path);
      step = h.progress.step;
      epoch = h.progress.epoch;
      first_batch = h.progress.batch;
      resumed_from = path;
      last_checkpoint = step;  // nothing to write again at this step
      if (h.progress.target_reached_ms >= 0) time_to_target = double(h.progress.target_reached_ms) / 1000.0;
      run.log(fmt::format("[resume] {}: step {} (epoch {}, next batch {}), written by {} rank(s) with {}{}; loaded "
                          "onto {} rank(s) with {} in {:.2f} s",
                          path, step, epoch, first_batch, h.origin.world, h.origin.strategy,
                          h.origin.sharding.empty() ? "" : " " + h.origin.sharding, mpi.world_size(), strategy,
                          now_seconds() - t0));
      if (h.progress.total_steps != total_steps)
        run.log(fmt::format("[resume] note: the checkpoint's run had {} steps in all, this one has {}: the "
                            "learning-rate schedule differs from here on",
                            h.progress.total_steps, total_steps));
      for (const std::string& change : checkpoints.config_changes(h))
        run.log("[resume] config changed since the checkpoint: " + change);
      if (time_to_target)
        run.log(fmt::format("[resume] the checkpoint's run reached its target after {:.1f} s of training: nothing "
                            "left to train (the final evaluation runs again)",
                            *time_to_target));
    }
  }
  const int64_t start_step = step;
  if (checkpoints.enabled())
    for (const std::string& moved : checkpoints.set_aside_newer_than(step))
      run.log(fmt::format("[checkpoint] {} is newer than step {}, where this run starts: an earlier run's, set "
                          "aside (no longer listed, loaded or pruned)",
                          moved, step));
  if (checkpoints.enabled())
    run.log(fmt::format("[init] checkpoints every {} steps and at the end to {}, newest {} kept",
                        config.checkpoint.every_steps, checkpoints.dir(), config.checkpoint.keep));
  RunTelemetry* step_records = nullptr;  // once training starts: the step before carries a checkpoint's time
  // The sampler position of the next batch, as the loop below moves it (not
  // derived from `step`: a resumed run may have another number of batches
  // per epoch than the run that wrote its checkpoint).
  int64_t next_epoch = epoch, next_batch = first_batch;
  auto save_checkpoint = [&] {
    checkpoint::Progress at{step, next_epoch, next_batch, total_steps, 0};
    at.target_reached_ms = time_to_target ? int64_t(std::llround(*time_to_target * 1000.0)) : -1;
    const auto [path, seconds] = checkpoints.save(at, step);
    if (step_records) step_records->add_checkpoint(seconds);
    last_checkpoint = step;
    run.log(fmt::format("[checkpoint] step {} written to {} in {:.2f} s", step, path, seconds));
  };
  StepBuffers buffers = make_step_buffers(s, sampler.local_batch());
  Progress progress(total_steps, config.train.progress_every_s);
  run.log(fmt::format("[init] {} optimizer, global batch {} ({} per rank, {} micro-batch(es)), "
                      "{} steps/epoch, {} steps, target {}, {} BLAS thread(s); ready in {:.2f} s",
                      s.optimizer->name(), config.train.global_batch_size, sampler.local_batch(),
                      micro_batches, steps_per_epoch, total_steps, describe_target(config.target),
                      cpu::blas_threads(), now_seconds() - init_start));

  // ---- train ----------------------------------------------------------------
  // The memory this rank will hold at its peak, predicted (memory_plan.h)
  // and, from here on, measured: the allocator's high-water mark.
  PlanData plan_data;
  plan_data.sample = model.input_sample();
  plan_data.classes = info.num_classes;
  plan_data.tokens = buffers.tokens;
  plan_data.test_samples = s.test_data.size();
  const MemoryPlan memory_plan = plan_memory(config, model, plan_data, topology);
  reset_high_water(Device::cpu());
  if (!s.device.is_cpu()) reset_high_water(s.device);
  mllog.end("init_stop");
  mllog.start("run_start");
  const double run_start = now_seconds();
  RunTelemetry run_telemetry(config, dir, mpi.rank(), mpi.world_size(), comm.get(), run_start);
  run_telemetry.set_device(s.device);
  step_records = &run_telemetry;
  if (!fabric.report.is_null()) run_telemetry.set_fabric(fabric.report, fabric.text);
  if (s.train_stream) s.train_stream->start({epoch, first_batch}, std::max<int64_t>(0, total_steps - step));
  const std::function<int64_t()> stage_bytes =
      staging.enabled() ? std::function<int64_t()>([&] { return staging.take_bytes(); }) : nullptr;
  int64_t trained_samples = 0;  // by this process (a resumed run counts from its start)
  double loss_sum = 0.0;  // this rank's, since the last evaluation
  int64_t loss_samples = 0;
  EvalResult last_eval;
  int64_t last_eval_step = -1;
  std::string status = "completed";
  const int rank = mpi.rank();
  bool checkpoint_after_eval = false;

  auto run_eval = [&] {
    const double t_eval = now_seconds();
    const double ep = double(step) / double(steps_per_epoch);
    const int64_t epoch_num = int64_t(std::ceil(ep));
    mllog.start("eval_start", nullptr, {{"epoch_num", epoch_num}});
    {
      telemetry::Span span("eval", "eval", step);
      // FSDP: each Block gathered for its forward, as in training.
      last_eval = evaluate(model, s.test_data, config.train.eval_batch_size, comm.get(), s.language_model,
                           strat->eval_hooks());
      strat->end_evaluation();  // its collectives are the evaluation's (eval_s), not the next step's
    }
    mllog.end("eval_stop", nullptr, {{"epoch_num", epoch_num}});
    mllog.event("eval_accuracy", last_eval.accuracy, {{"epoch_num", epoch_num}});
    last_eval_step = step;
    const std::vector<double> sums =
        comm ? sum_over_ranks(*comm, {loss_sum, double(loss_samples)})
             : std::vector<double>{loss_sum, double(loss_samples)};
    const double train_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
    const double step_s = run_telemetry.step_seconds();
    const double sps = step_s > 0 ? double(trained_samples) / step_s : 0.0;
    run.append_metrics({{"epoch", ep},
                        {"step", step},
                        {"train_loss", sums[1] > 0 ? json(train_loss) : json(nullptr)},
                        {"test_loss", last_eval.loss},
                        {"test_accuracy", last_eval.accuracy},
                        {"samples_per_s", sps},
                        {"lr", schedule.at(std::max<int64_t>(0, step - 1))},
                        {"elapsed_s", now_seconds() - run_start}});
    run.log(fmt::format("[eval] epoch {:.2f}  step {}  train_loss {:.4f}  test_loss {:.4f}  "
                        "test_accuracy {:.2f}%  {:.0f} samples/s",
                        ep, step, train_loss, last_eval.loss, 100 * last_eval.accuracy, sps));
    loss_sum = 0.0;
    loss_samples = 0;
    if (!time_to_target && reached(config.target, last_eval)) {
      time_to_target = now_seconds() - run_start;
      run.log(fmt::format("[eval] target {} reached at epoch {:.2f} (step {}) after {:.1f} s",
                          describe_target(config.target), ep, step, *time_to_target));
    }
    run_telemetry.add_eval(now_seconds() - t_eval);
  };

  // Errors from here on are this rank's alone (the others are in a step or
  // an evaluation): end the job before unwinding (runtime/train/fatal_error.h).
  try {
    for (; epoch < config.train.epochs && step < total_steps && !time_to_target; ++epoch) {
      mllog.start("epoch_start", nullptr, {{"epoch_num", epoch + 1}});
      for (int64_t b = std::exchange(first_batch, 0); b < steps_per_epoch && step < total_steps; ++b) {
        if (config.debug.kill_step == step && config.debug.slow_rank == rank) std::raise(SIGKILL);
        live_step = step;
        const float lr = schedule.at(step);
        const StepPhases phases = timed_step(config, s, sampler, buffers, run_telemetry,
                                             {epoch, b, step, steps_per_epoch}, lr, *strat, rank, injected_comm_s,
                                             stage_bytes);
        ++step;
        next_epoch = b + 1 < steps_per_epoch ? epoch : epoch + 1;
        next_batch = b + 1 < steps_per_epoch ? b + 1 : 0;
        trained_samples += config.train.global_batch_size;
        const double loss = phases.loss_sum;
        // Every rank holds the same parameters after the update, but each sees
        // only its own loss: a rank whose loss is not finite stops the job.
        if (!std::isfinite(loss)) {
          status = "diverged";
          run.log(fmt::format("[train] training diverged at step {} (loss {}): lower optim.lr or "
                              "set optim.clip_grad_norm",
                              step, loss));
          if (mpi.world_size() > 1)
            throw Error(fmt::format("training diverged at step {} (loss {})", step, loss));
          break;
        }
        // A checkpoint due where the epoch (or the run) ends waits for the
        // evaluation that follows, so that it records it: a run resumed
        // from it neither skips that evaluation nor misses a target reached
        // there.
        if (checkpoints.due(step)) {
          if (b + 1 < steps_per_epoch && step < total_steps)
            save_checkpoint();
          else
            checkpoint_after_eval = true;
        }
        loss_sum += loss;
        loss_samples += sampler.local_batch() * buffers.tokens;  // the loss is per label: per token for gpt
        const double step_s = run_telemetry.step_seconds();
        const std::string line =
            progress.update(step, epoch, config.train.epochs, loss / double(sampler.local_batch() * buffers.tokens), lr,
                            double(trained_samples) / step_s, step_s / double(step - start_step));
        if (!line.empty()) run.log(line);
      }
      live_step = -1;
      if (status != "completed") break;
      run_eval();
      if (std::exchange(checkpoint_after_eval, false)) save_checkpoint();
      mllog.end("epoch_stop", nullptr, {{"epoch_num", epoch + 1}});
    }
    // `final` is evaluated at the end of every run, also one cut short by max_steps.
    if (status == "completed" && last_eval_step != step) run_eval();
    if (status == "completed" && checkpoints.enabled() && last_checkpoint != step) save_checkpoint();
  } catch (const std::exception& e) {
    if (mpi.world_size() > 1) report_fatal_error(e, mpi.rank(), mpi.world_size());
    throw;
  }
  const double train_time = now_seconds() - run_start;

  // ---- result -------------------------------------------------------------
  const double step_s = run_telemetry.step_seconds();
  const double sps = step_s > 0 ? double(trained_samples) / step_s : 0.0;
  json result = {
      {"status", status},
      {"reached_target", time_to_target.has_value()},
      {"target", config.target.enabled()
                     ? json{{"metric", config.target.metric}, {"value", config.target.value}}
                     : json(nullptr)},
      {"final", last_eval_step >= 0
                    ? json{{"test_accuracy", last_eval.accuracy}, {"test_loss", last_eval.loss}}
                    : json(nullptr)},  // a diverged run is not evaluated
      {"time_to_target_s", time_to_target ? json(*time_to_target) : json(nullptr)},
      {"train_time_s", train_time},
      {"step_time_s", step_s},
      {"init_time_s", run_start - init_start},
      {"steps", step},
      {"epochs", double(step) / double(steps_per_epoch)},
      {"samples_per_s", sps},
      {"global_batch_size", config.train.global_batch_size},
      {"world_size", mpi.world_size()},
      {"strategy", strategy},
      {"seed", config.train.seed},
      {"parameters", model.flat().parameter_count()},
      {"config", config.source},
      {"resumed_from", resumed_from.empty() ? json(nullptr) : json(resumed_from)},
      {"checkpoint", last_checkpoint >= 0 ? json(checkpoint::checkpoint_path(checkpoints.dir(), last_checkpoint))
                                          : json(nullptr)},
  };
  mllog.end("run_stop", nullptr,
            {{"status", status == "completed" && (time_to_target || !config.target.enabled())
                            ? "success"
                            : "aborted"}});
  // Peak tensor bytes per rank since training began, against the plan (for
  // a GPU run the plan describes the GPU's share: parameters, state,
  // activations).
  {
    // On a GPU also what the tensors do not show: the bytes the caching
    // allocator holds from the driver (its cached blocks included) and the
    // kernels' workspaces (cuBLAS's own not counted).
    const std::vector<double> mine = {double(memory_stats(s.device).high_water_bytes),
                                      double(gpu_reserved_bytes()), double(gpu_workspace_bytes())};
    const std::vector<std::vector<double>> all =
        comm ? gather_from_ranks(*comm, mine) : std::vector<std::vector<double>>{mine};
    json per_rank = json::array();
    double peak = 0, reserved = 0, workspace = 0;
    for (const auto& r : all) {
      per_rank.push_back(int64_t(r[0]));
      peak = std::max(peak, r[0]);
      reserved = std::max(reserved, r[1]);
      workspace = std::max(workspace, r[2]);
    }
    result["memory"] = {{"peak_bytes", int64_t(peak)},
                        {"peak_bytes_per_rank", per_rank},
                        {"device", s.device.str()},
                        {"plan", plan_json(memory_plan)}};
    run.log(fmt::format("[summary] memory: peak {:.2f} MiB of tensors per rank (max over ranks, {}), the plan "
                        "predicted {:.2f} MiB (measured/predicted {:.3f}; `shardtrain plan` breaks it down)",
                        peak / (1 << 20), s.device.str(), double(memory_plan.peak_bytes) / (1 << 20),
                        peak / double(memory_plan.peak_bytes)));
    if (!s.device.is_cpu()) {
      result["memory"]["gpu_reserved_bytes"] = int64_t(reserved);
      result["memory"]["gpu_workspace_bytes"] = int64_t(workspace);
      run.log(fmt::format("[summary] memory: a rank holds up to {:.2f} MiB of {} from the driver for tensors "
                          "(cached blocks included) and {:.2f} MiB of kernel workspaces outside the plan "
                          "(cuBLAS's own not counted)",
                          reserved / (1 << 20), s.device.str(), workspace / (1 << 20)));
    }
  }
  const std::string summary = run_telemetry.finish(result);
  if (comm) result["comm_engine_priority_raised"] = comm::engine_priority_raised();
  run.write_file("result.json", result.dump(2) + "\n");
  // Every line tagged like the rest of the log, so that grep '^\[summary\]' finds it.
  std::string tagged;
  for (size_t at = 0; at < summary.size();) {
    const size_t end = std::min(summary.find('\n', at), summary.size());
    if (end > at) tagged += (tagged.empty() ? "[summary] " : "\n[summary] ") + summary.substr(at, end - at);
    at = end + 1;
  }
  run.log(tagged);
  if (s.train_stream) {
    const io::LoaderStats ls = s.train_stream->stats();
    std::string mode = ls.transfer;
    if (ls.transfer == "collective")
      mode += ls.no_collective_cause.empty()
                  ? fmt::format(" (HDF5 did: {})", ls.actual_io_mode)
                  : fmt::format(" (HDF5 did: {}, because {})", ls.actual_io_mode, ls.no_collective_cause);
    run.log(fmt::format("[summary] data (rank 0): read {:.1f} MB in {} requests ({} batches), {:.2f} s in reads, "
                        "{} transfer",
                        double(ls.bytes) / 1e6, ls.requests, ls.batches, ls.read_s, mode));
  }
  if (mpi.rank() == 0 && staging.stager()) run.log(staging.summary());
  if (comm)
    run.log(comm_volume_line(spec->wire_theory(model.flat(), plan_in), model.flat().parameter_count(),
                             result["timing"]["comm_wire_bytes"].get<double>()));
  if (comm && !comm::engine_priority_raised())
    run.log("[summary] note: the communication threads could not raise their priority (no "
            "CAP_SYS_NICE); when ranks fill every core, collectives may wait for the scheduler");
  const std::string target_outcome =
      !config.target.enabled() ? std::string("no target set")
      : time_to_target ? fmt::format("target {} reached in {:.1f} s", describe_target(config.target), *time_to_target)
                       : fmt::format("target {} NOT reached", describe_target(config.target));
  const std::string final_metrics =
      last_eval_step < 0 ? std::string("not evaluated")
                         : fmt::format("final test_accuracy {:.2f}% test_loss {:.4f}",
                                       100 * last_eval.accuracy, last_eval.loss);
  run.log(fmt::format("[done] {}: {} steps ({:.2f} epochs) in {:.1f} s, {:.0f} samples/s; {}; {}; "
                      "results in {}/result.json",
                      status, step, double(step) / double(steps_per_epoch), train_time, sps,
                      final_metrics, target_outcome, dir));
  return status == "completed" ? 0 : 1;
}

}  // namespace shardtrain::train
