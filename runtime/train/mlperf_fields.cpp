#include "runtime/train/mlperf_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

namespace shardtrain::train {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

// MLPerf's names: the lowest precision the step's matrix products use.
std::string linear_precision(const Config& c) {
  if (c.runtime.precision == Precision::bf16) return "bfloat16";
  if (c.runtime.device == DeviceKind::cuda && c.runtime.gpu_gemm_used() == GpuGemm::tf32) return "tf32";
  return "fp32";
}

std::string comm_precision(const Config& c) {
  const parallel::ParallelOptions& p = c.parallel;
  const bool low = p.strategy == "fsdp" ? p.fsdp.reduce_dtype == DType::bf16 : p.ddp.grad_dtype == DType::bf16;
  return low ? "bfloat16" : "fp32";
}

}  // namespace

std::string default_platform(const Config& config, int world_size) {
  return fmt::format("{}x {} ({})", world_size, name_of(config.runtime.device), cpu_model());
}

void log_mlperf_fields(telemetry::MlLog& log, const Config& config, int world_size) {
  const Config::Telemetry& t = config.telemetry;
  log.event("submission_org", t.mlperf_org);
  log.event("submission_platform",
            t.mlperf_platform.empty() ? default_platform(config, world_size) : t.mlperf_platform);
  log.event("submission_division", t.mlperf_division);
  log.event("submission_status", t.mlperf_status);
  // Cleared in the sense MLPerf means: every read comes from storage, not
  // from pages an earlier run left (data.cold_cache drops each page after
  // it is read).
  log.event("cache_clear", config.data.loader.cold_cache,
            {{"how", config.data.loader.cold_cache ? "data.cold_cache: pages dropped after each read"
                                                   : "not cleared: the page cache may hold the data"}});
  log.event("lowest_numerical_precision_in_linear", linear_precision(config));
  log.event("lowest_numerical_precision_in_attn", linear_precision(config));
  log.event("lowest_numerical_precision_in_comm", comm_precision(config));
  // Data parallel strategies only (DDP, ZeRO-1, FSDP, HYBRID).
  for (const char* key : {"tensor_parallelism", "pipeline_parallelism", "context_parallelism", "expert_parallelism"})
    log.event(key, 1);
  const int64_t local = (config.train.global_batch_size + world_size - 1) / world_size;
  log.event("micro_batch_size", std::max<int64_t>(1, local / config.train.accumulation_steps));
  log.event("gradient_accumulation_steps", config.train.accumulation_steps);
  log.event("config_filename", config.source.empty() ? std::string("(defaults)") : config.source);
}

}  // namespace shardtrain::train
