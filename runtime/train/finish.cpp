// finish(): result.json and the run's last lines (train_loop.h).
#include "kernels/cpu/onednn_conv.h"
#include "kernels/devices.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/comm/engine/progress_engine.h"
#include "runtime/core/clock.h"
#include "runtime/train/comm_volume.h"
#include "runtime/train/run_lines.h"
#include "runtime/train/storage_report.h"
#include "runtime/train/train_loop.h"

#include <nlohmann/json.hpp>

#include <optional>

namespace shardtrain::train {
namespace {

using nlohmann::json;

// Peak tensor bytes per rank since training began, against the plan (for a
// GPU run the plan describes the GPU's share: parameters, state,
// activations), and on a GPU what the tensors do not show: the bytes the
// caching allocator holds from the driver (its cached blocks included) and
// the kernels' workspaces (cuBLAS's own not counted); on a CPU, oneDNN's
// convolution buffers. Maxima over ranks.
MemoryFigures measure_memory(const Job& job, const MemoryPlan& plan, json& per_rank) {
  const std::vector<double> mine = {double(memory_stats(job.s.device).high_water_bytes), double(gpu_reserved_bytes()),
                                    double(gpu_workspace_bytes()), double(cpu::onednn_conv_workspace_bytes())};
  const std::vector<std::vector<double>> all =
      job.comm ? gather_from_ranks(*job.comm, mine) : std::vector<std::vector<double>>{mine};
  MemoryFigures m;
  m.planned = double(plan.peak_bytes);
  m.device = job.s.device.str();
  per_rank = json::array();
  for (const auto& r : all) {
    per_rank.push_back(int64_t(r[0]));
    m.peak = std::max(m.peak, r[0]);
    m.gpu_reserved = std::max(m.gpu_reserved, r[1]);
    m.gpu_workspace = std::max(m.gpu_workspace, r[2]);
    m.cpu_workspace = std::max(m.cpu_workspace, r[3]);
  }
  return m;
}

}  // namespace

int finish(Job& job, const LoopState& state, RunTelemetry& telemetry, const MemoryPlan& plan) {
  const Config& config = job.config;
  RunDir& run = job.ctx.run;
  const double train_time = now_seconds() - state.run_start;
  const double step_s = telemetry.step_seconds();
  const double sps = step_s > 0 ? double(state.trained_samples) / step_s : 0.0;
  const double epochs = double(state.step) / double(job.steps_per_epoch);
  json result = {
      {"status", state.status},
      {"reached_target", state.time_to_target.has_value()},
      {"target", config.target.enabled() ? json{{"metric", config.target.metric}, {"value", config.target.value}}
                                         : json(nullptr)},
      // A diverged run is not evaluated, a preempted one not at its last step.
      {"final", state.last_eval && !(state.status == "preempted" && state.last_eval_step != state.step)
                    ? json{{"test_accuracy", state.last_eval->accuracy}, {"test_loss", state.last_eval->loss}}
                    : json(nullptr)},
      {"time_to_target_s", state.time_to_target ? json(*state.time_to_target) : json(nullptr)},
      {"train_time_s", train_time},
      {"step_time_s", step_s},
      {"init_time_s", state.run_start - job.ctx.start_s},
      {"steps", state.step},
      {"epochs", epochs},
      {"samples_per_s", sps},
      {"global_batch_size", config.train.global_batch_size},
      {"world_size", job.mpi.world_size()},
      {"strategy", job.spec->name()},
      {"seed", config.train.seed},
      {"parameters", job.s.model->flat().parameter_count()},
      {"config", config.source},
      {"resumed_from", state.resumed_from.empty() ? json(nullptr) : json(state.resumed_from)},
      {"checkpoint", state.last_checkpoint >= 0
                         ? json(checkpoint::checkpoint_path(job.checkpoints->dir(), state.last_checkpoint))
                         : json(nullptr)},
  };
  job.ctx.mllog.end(
      "run_stop", nullptr,
      {{"status",
        state.status == "completed" && (state.time_to_target || !config.target.enabled()) ? "success" : "aborted"}});
  json per_rank;
  const MemoryFigures memory = measure_memory(job, plan, per_rank);
  const bool gpu = !job.s.device.is_cpu();
  result["memory"] = {{"peak_bytes", int64_t(memory.peak)},
                      {"peak_bytes_per_rank", per_rank},
                      {"device", memory.device},
                      {"plan", plan_json(plan)}};
  if (gpu) {
    result["memory"]["gpu_reserved_bytes"] = int64_t(memory.gpu_reserved);
    result["memory"]["gpu_workspace_bytes"] = int64_t(memory.gpu_workspace);
  } else {
    result["memory"]["cpu_workspace_bytes"] = int64_t(memory.cpu_workspace);
  }
  run.log(memory_lines(memory, gpu));
  std::optional<StorageFigures> storage;
  if (job.s.train_stream) {
    storage = measure_storage(job.comm.get(), job.s.train_info().shard_files, state.storage_bytes_at_start,
                              job.s.train_stream->stats());
    result["storage"] = to_json(*storage);
  }
  if (const auto& graphs = job.buffers.graphs)
    result["cuda_graphs"] = {{"made", graphs->captures()},
                             {"replayed_micro_batches", graphs->launches()},
                             {"off_reason", graphs->off_reason()}};
  if (job.s.emulated)
    result["emulated_device"] = {{"sample_s", job.s.emulated->sample_seconds()}, {"source", job.s.emulated->source()}};
  if (const auto& p = job.s.compute_profile) result["emulated_compute"] = {{"source", p->source}, {"batch", p->batch}};
  const std::string summary = telemetry.finish(result);
  std::optional<parallel::WireTheory> wire_theory;
  if (job.comm) {
    wire_theory = job.spec->wire_theory(job.s.model->flat(), job.plan_inputs);
    result["comm_engine_priority_raised"] = comm::engine_priority_raised();
    if (result.contains("timing")) {
      result["timing"]["comm_wire_bytes_theory"] = wire_theory->bytes;
      result["timing"]["comm_wire_theory"] = wire_theory->formula;
    }
  }
  run.write_file("result.json", result.dump(2) + "\n");
  run.log(summary_lines(summary));
  if (job.s.train_stream) run.log(loader_line(job.s.train_stream->stats()));
  if (const auto& graphs = job.buffers.graphs) {
    std::string why_not;
    const bool no_sync_ones = config.train.accumulation_steps > 1 && job.strategy->hooks_capturable(false);
    if (!job.strategy->hooks_capturable(true) && !no_sync_ones)
      why_not = fmt::format("parallel.strategy = \"{}\" communicates during the backward", config.parallel.strategy);
    if (config.telemetry.op_timing) why_not = "telemetry.op_timing times each kernel";
    run.log(why_not.empty() ? graphs_line(graphs->captures(), graphs->launches(), graphs->off_reason())
                            : fmt::format("[summary] CUDA graphs: not used ({})", why_not));
  }
  if (storage) run.log(storage_line(*storage));
  if (job.mpi.rank() == 0 && job.staging.stager()) run.log(job.staging.summary());
  if (job.comm) {
    run.log(comm_volume_line(*wire_theory, job.s.model->flat().parameter_count(),
                             result["timing"]["comm_wire_bytes"].get<double>()));
    if (!comm::engine_priority_raised())
      run.log(
          "[summary] note: the communication threads could not raise their priority (no CAP_SYS_NICE); "
          "when ranks fill every core, collectives may wait for the scheduler");
  }
  DoneFigures done;
  done.status = state.status;
  done.steps = state.step;
  done.epochs = epochs;
  done.train_seconds = train_time;
  done.samples_per_s = sps;
  if (!result["final"].is_null()) done.final_eval = state.last_eval;
  done.time_to_target = state.time_to_target;
  done.dir = job.ctx.dir;
  run.log(done_line(done, config.target));
  if (state.status == "preempted") return kPreemptedExitCode;
  return state.status == "completed" ? 0 : 1;
}

}  // namespace shardtrain::train
