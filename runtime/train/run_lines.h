// The lines a training run prints ([init], [resume], [eval], [summary],
// [done]): pure functions from what the run knows to text, in one place, so
// that the job's code reads as what it does and a wording is changed once.
#pragma once

#include "io/dataset.h"
#include "io/stream_loader.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train/config.h"
#include "runtime/train/session.h"

#include <optional>
#include <string>

namespace shardtrain::train {

// "test_accuracy >= 88.00%", "test_loss <= 1.6500" or "none".
std::string describe_target(const Config::Target& target);

std::string opening_line(int world, const std::string& strategy, const std::string& config, const std::string& dir);
std::string device_line(Device device, const std::string& gpu_name, const std::string& gemm);
std::string data_line(const io::DatasetInfo& train, const io::DatasetInfo& test, int64_t train_samples,
                      int64_t test_samples, bool verify);
std::string stream_line(const io::DatasetInfo& train, const Config& config);
std::string model_line(const Config& config, const nn::Model& model);

struct ReadyFigures {
  std::string optimizer;
  int64_t global_batch = 0, world = 1, micro_batches = 1, steps_per_epoch = 0, total_steps = 0;
  int blas_threads = 1;
  double seconds = 0;  // since the job started
};
std::string ready_line(const ReadyFigures& r, const Config::Target& target);
std::string checkpoints_line(int64_t every, const std::string& dir, int64_t keep);

// "[resume] PATH: step ..., written by ... loaded onto ... in S s".
std::string resume_line(const std::string& path, const checkpoint::Header& h, int world, const std::string& strategy,
                        double seconds);

std::string eval_line(double epoch, int64_t step, double train_loss, const EvalResult& r, double samples_per_s);

struct MemoryFigures {
  double peak = 0, planned = 0;  // bytes of tensors per rank: max over ranks, and the plan's
  double gpu_reserved = 0, gpu_workspace = 0;
  double cpu_workspace = 0;  // oneDNN's convolution buffers (kernels/cpu/onednn_conv.h)
  std::string device;
};
// One line, two on a GPU (what the driver holds besides the tensors) or on
// a CPU where oneDNN's convolutions held buffers.
std::string memory_lines(const MemoryFigures& m, bool gpu);
std::string loader_line(const io::LoaderStats& ls);
// runtime.cuda_graphs' outcome: graphs made and micro-batches replayed,
// and why graphs went off if they did; or why they did not apply.
std::string graphs_line(int64_t captures, int64_t launches, const std::string& off_reason);

// Every line of a multi-line text tagged "[summary] ".
std::string summary_lines(const std::string& text);

struct DoneFigures {
  std::string status;
  int64_t steps = 0;
  double epochs = 0, train_seconds = 0, samples_per_s = 0;
  std::optional<EvalResult> final_eval;  // none: not evaluated (diverged)
  std::optional<double> time_to_target;
  std::string dir;
};
std::string done_line(const DoneFigures& d, const Config::Target& target);

}  // namespace shardtrain::train
