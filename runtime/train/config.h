// The training configuration: a TOML file plus `--set key=value` overrides,
// validated against one schema (config.cpp). An unknown key is an
// error that names it and lists the valid keys of its section; a value of the
// wrong type names the key path. docs/config.md is generated from the schema.
#pragma once

#include "io/loader_options.h"
#include "kernels/cpu/cpu_backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/schedule.h"
#include "runtime/parallel/strategy.h"
#include "runtime/train/emulated_device.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::train {

enum class TargetMetric { test_accuracy, test_loss };
inline std::span<const EnumName<TargetMetric>> enum_names(TargetMetric) {
  static constexpr std::array<EnumName<TargetMetric>, 2> n = {
      {{TargetMetric::test_accuracy, "test_accuracy"}, {TargetMetric::test_loss, "test_loss"}}};
  return n;
}
// emulated: the input pipeline runs, the compute is a wait (emulated_device.h).
enum class DeviceKind { cpu, cuda, emulated };
inline std::span<const EnumName<DeviceKind>> enum_names(DeviceKind) {
  static constexpr std::array<EnumName<DeviceKind>, 3> n = {
      {{DeviceKind::cpu, "cpu"}, {DeviceKind::cuda, "cuda"}, {DeviceKind::emulated, "emulated"}}};
  return n;
}
// GEMM precision of f32 tensors on the GPU (bf16: bf16 operands, f32 accumulation).
enum class GpuLinear { cublaslt, cublas };
inline std::span<const EnumName<GpuLinear>> enum_names(GpuLinear) {
  static constexpr std::array<EnumName<GpuLinear>, 2> n = {
      {{GpuLinear::cublaslt, "cublaslt"}, {GpuLinear::cublas, "cublas"}}};
  return n;
}
enum class GpuAttention { cudnn, materialized, tiled };
inline std::span<const EnumName<GpuAttention>> enum_names(GpuAttention) {
  static constexpr std::array<EnumName<GpuAttention>, 3> n = {
      {{GpuAttention::cudnn, "cudnn"}, {GpuAttention::materialized, "materialized"}, {GpuAttention::tiled, "tiled"}}};
  return n;
}
enum class Precision { f32, bf16 };
inline std::span<const EnumName<Precision>> enum_names(Precision) {
  static constexpr std::array<EnumName<Precision>, 2> n = {{{Precision::f32, "f32"}, {Precision::bf16, "bf16"}}};
  return n;
}
enum class GpuGemm { f32, tf32, bf16 };
inline std::span<const EnumName<GpuGemm>> enum_names(GpuGemm) {
  static constexpr std::array<EnumName<GpuGemm>, 3> n = {
      {{GpuGemm::f32, "f32"}, {GpuGemm::tf32, "tf32"}, {GpuGemm::bf16, "bf16"}}};
  return n;
}

struct Config {
  struct Run {
    std::string dir;  // empty: runs/<config name>-<timestamp>
  } run;
  struct Train {
    int64_t seed = 1;
    int64_t epochs = 10;
    int64_t max_steps = 0;  // 0 = no limit
    int64_t global_batch_size = 128;
    int64_t accumulation_steps = 1;  // micro-batches per optimizer step (no_sync on all but the last)
    int64_t eval_batch_size = 1000;
    double progress_every_s = 2.0;
  } train;
  struct Data {
    std::string train = "data/fashion-mnist/train";
    std::string test = "data/fashion-mnist/test";
    int64_t train_limit = 0;  // use only the first N samples (0 = all)
    int64_t test_limit = 0;
    io::LoaderOptions loader;
  } data;
  struct Io {
    io::StageOptions stage;
  } io;
  nn::ModelSpec model;
  optim::OptimizerConfig optim;
  double clip_grad_norm = 0.0;  // optim.clip_grad_norm; 0 = off
  optim::ScheduleConfig schedule;
  struct Target {
    TargetMetric metric = TargetMetric::test_accuracy;  // reached when accuracy >= value, or loss <= value
    double value = 0.0;                                 // 0 = no target
    bool enabled() const { return value > 0.0; }
  } target;
  parallel::ParallelOptions parallel;  // strategy (a name of parallel::strategy_names()), ddp, fsdp
  comm::CommOptions comm;
  struct Runtime {
    int64_t blas_threads = 1;
    cpu::CpuBackend cpu_backend = cpu::CpuBackend::automatic;
    DeviceKind device = DeviceKind::cpu;
    Precision precision = Precision::f32;  // bf16: mixed precision (bf16 activations and GEMMs)
    GpuGemm gpu_gemm = GpuGemm::tf32;      // at precision f32
    // The GPU's GEMM precision this run uses: bf16 under mixed precision.
    GpuGemm gpu_gemm_used() const { return precision == Precision::bf16 ? GpuGemm::bf16 : gpu_gemm; }
    GpuLinear gpu_linear = GpuLinear::cublaslt;
    GpuAttention gpu_attention = GpuAttention::cudnn;
    bool cuda_graphs = true;
    EmulateOptions emulate;  // device = "emulated"
    // An emulated accelerator's input as stored (emulate.input = "bytes"):
    // the batches stay in the streaming loader's slots, no host step reads them.
    bool input_unread() const { return device == DeviceKind::emulated && emulate.input == EmulatedInput::bytes; }
  } runtime;
  struct Telemetry {
    bool enabled = true;
    bool trace = true;                  // telemetry/trace-rank-*.json and trace.json
    double straggler_threshold = 0.05;  // busy time above the median over ranks by this fraction
    int64_t flight_spans = 512;         // spans per thread kept for the flight recorder
    bool op_timing = false;             // time every op by class (runtime/core/op_timing.h)
    // The MLPerf log's submission fields (mllog.txt; docs/telemetry.md).
    std::string mlperf_org = "unnamed";
    std::string mlperf_platform;             // "": the ranks, the device and the host's CPU, e.g. "2x cpu (...)"
    std::string mlperf_division = "open";    // open or closed
    std::string mlperf_status = "research";  // available, preview or research
  } telemetry;
  struct Checkpoint {
    int64_t every_steps = 0;  // 0 = no checkpoints
    int64_t keep = 3;
    std::string dir;             // empty: <run dir>/checkpoints
    bool on_signal = false;      // checkpoint on SIGTERM/SIGINT/SIGUSR1 even when every_steps is 0
    double signal_grace_s = 20;  // below Slurm's default KillWait (30 s)
  } checkpoint;
  struct Debug {
    int64_t slow_rank = -1;  // -1: none
    double slow_compute_ms = 0, slow_data_ms = 0, slow_comm_ms = 0;
    int64_t fail_step = -1;           // debug.slow_rank throws an error at this step (-1: never)
    int64_t kill_step = -1;           // debug.slow_rank SIGKILLs itself after this many steps
    int64_t kill_in_checkpoint = -1;  // ... or while writing this step's checkpoint
  } debug;

  std::string source;  // the file it was read from ("" for defaults)
  // What loading set aside without an error, one line each (another
  // strategy's section in the file); a run prints them once, in [init].
  std::vector<std::string> notices;
};

// Reads `path`, applies overrides ("key=value": the value is parsed as TOML,
// and taken as a string where that fails; "~key" removes a key or a table,
// as Hydra's syntax does: a known key or section that is not set is no
// error, an unknown one is), validates. A section of another strategy's
// options in the file is set aside with a notice (Config::notices), so one
// command line switches strategies across configs; the same keys given
// with --set are an error (they would do nothing). Errors name the file
// or the --set argument, and the key. `for_plan`: the config is planned,
// not run (`shardtrain plan`): combinations refused only because they have
// not run yet (FSDP on a GPU, below) are accepted.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {}, bool for_plan = false);

// SHARDTRAIN_UNVERIFIED_GPU_FSDP=1 in the environment: FSDP with
// runtime.device = "cuda" is accepted although its device path has not yet
// run on a GPU (scripts/gpu-check.sh sets it to check that path; the run log
// says so). Without it the config refuses the combination.
bool unverified_gpu_fsdp_allowed();

// The fully resolved configuration as TOML (every key, defaults included).
std::string to_toml(const Config& config);

// The reference of every key (type, default, meaning) as Markdown: docs/config.md.
std::string config_reference_markdown();

}  // namespace shardtrain::train
