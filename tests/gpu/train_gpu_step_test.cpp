// Training steps of the reference MLP, CNN and small GPT on the GPU against
// the same steps on the CPU (same seed, same batches): the loss of every step
// and the parameters after K steps agree within the GEMM precision's
// tolerance. Then the GPU's step throughput and achieved TFLOP/s (model
// GEMM FLOPs counted on the CPU by GemmRecorder). Lines for
// scripts/gpu-check.sh:
//   GPUCHECK kernel=train_<model>_<what> dtype=<p> relerr=<e> limit=<l> ok=<0|1>
//   GPUTRAIN model=<m> precision=<p> batch=<b> step_ms=<t> samples_s=<s> tflops=<f>
#include "kernels/cpu/gemm.h"
#include "kernels/devices.h"
#include "kernels/ops.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/none_strategy.h"
#include "runtime/train/session.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/train_gpu_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::gpu_test;

namespace {

void compare_with_cpu(const Case& c, const char* precision, double limit) {
  constexpr int kSteps = 5;
  set_gpu_gemm_precision(precision);
  ModelRun cpu = make_run(c, Device::cpu());
  ModelRun gpu_run = make_run(c, gpu());
  double worst = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double lc = step(c, cpu, i), lg = step(c, gpu_run, i);
    worst = std::max(worst, rel_error_scalar(lg, lc));
  }
  report(fmt::format("train_{}_loss_{}steps", c.name, kSteps), precision, worst, limit);
  report(fmt::format("train_{}_params_{}steps", c.name, kSteps), precision,
         rel_error(gpu_run.model->flat().params(), cpu.model->flat().params()), limit);
  set_gpu_gemm_precision("f32");
}

void throughput(const Case& c, const char* precision, double flops) {
  set_gpu_gemm_precision(precision);
  ModelRun r = make_run(c, gpu());
  for (int i = 0; i < 3; ++i) step(c, r, i);  // warm-up: cuBLAS plans, allocator cache
  synchronize_gpu();
  constexpr int kSteps = 20;
  const double t0 = now_seconds();
  for (int i = 0; i < kSteps; ++i) step(c, r, 3 + i);
  synchronize_gpu();
  const double per_step = (now_seconds() - t0) / kSteps;
  const double tflops = flops / per_step * 1e-12;
  std::printf("GPUTRAIN model=%s precision=%s batch=%lld step_ms=%.3f samples_s=%.0f tflops=%.2f\n", c.name, precision,
              static_cast<long long>(c.batch), per_step * 1e3, double(c.batch) / per_step, tflops);
  std::fflush(stdout);
  set_gpu_gemm_precision("f32");
}

}  // namespace

// f32 GEMMs: the GPU and OpenBLAS sum in different orders; 5 AdamW steps keep
// the difference near rounding (1e-4 of the loss and the parameters).
TEST(GpuTraining, MlpMatchesCpu) {
  ST_REQUIRE_GPU();
  compare_with_cpu(mlp_case(), "f32", 1e-4);
  compare_with_cpu(mlp_case(), "tf32", 1e-2);
}

TEST(GpuTraining, CnnMatchesCpu) {
  ST_REQUIRE_GPU();
  compare_with_cpu(cnn_case(), "f32", 1e-4);
  compare_with_cpu(cnn_case(), "tf32", 1e-2);
  // The convolutions' cols live in the context's workspace, and it says so.
  EXPECT_GT(gpu_workspace_bytes(), size_t(0));
}

TEST(GpuTraining, GptMatchesCpu) {
  ST_REQUIRE_GPU();
  compare_with_cpu(gpt_case(), "f32", 1e-4);
  compare_with_cpu(gpt_case(), "tf32", 1e-2);
  compare_with_cpu(gpt_case(), "bf16", 5e-2);
}

TEST(GpuTraining, LlamaMatchesCpu) {
  ST_REQUIRE_GPU();
  compare_with_cpu(llama_case(), "f32", 1e-4);
  compare_with_cpu(llama_case(), "tf32", 1e-2);
  compare_with_cpu(llama_case(), "bf16", 5e-2);
}

// Global-norm clipping, whose norm stays on the device: the limit is half
// the first step's gradient norm (measured on the CPU), so it clips.
TEST(GpuTraining, GptWithClippingMatchesCpu) {
  ST_REQUIRE_GPU();
  Case c = gpt_case();
  ModelRun probe = make_run(c, Device::cpu());
  step(c, probe, 0);  // no clipping: the step's gradients stay as computed
  const double norm = std::sqrt(ops::sum_squares(probe.model->flat().grads()));
  ASSERT_GT(norm, 0.0);
  c.name = "gpt_clip";
  c.clip = 0.5 * norm;
  compare_with_cpu(c, "f32", 1e-4);
}

// A bad token id or label stops a GPU step before its batch is copied, with
// the CPU step's message (the place within its micro-batch: the bad value
// sits in the second of two).
TEST(GpuTraining, BadTokenIdOrLabelIsTheCpuError) {
  ST_REQUIRE_GPU();
  const Case c = gpt_case();
  for (const bool bad_label : {false, true}) {
    std::vector<std::string> messages;
    for (const Device d : {Device::cpu(), gpu()}) {
      ModelRun r = make_run(c, d);
      load(c, 0, r.buffers);
      const int64_t at = (c.batch / 2) * c.sample[0] + 5;
      if (bad_label)
        r.buffers.labels[size_t(at)] = 300;
      else
        r.buffers.x_host.i32()[at] = 300;
      std::string message;
      try {
        parallel::NoneStrategy alone(*r.model);
        train::train_step(*r.model, *r.opt, r.buffers, 0.05f, 0.0, c.batch, 2, alone);
      } catch (const Error& e) {
        message = e.what();
      }
      messages.push_back(message);
    }
    EXPECT_NE(messages[0].find(bad_label ? "row 5 " : "position 5 "), std::string::npos) << messages[0];
    EXPECT_EQ(messages[1], messages[0]) << (bad_label ? "label" : "token id");
  }
  EXPECT_NO_THROW(synchronize_gpu());  // nothing was left on the device to raise
}

TEST(GpuTraining, Throughput) {
  ST_REQUIRE_GPU();
  for (const Case& c : {mlp_case(), cnn_case(), gpt_case(), gpt_wide_case(), llama_case()}) {
    const double flops = step_flops(c);
    for (const char* p : {"f32", "tf32", "bf16"}) throughput(c, p, flops);
  }
}
