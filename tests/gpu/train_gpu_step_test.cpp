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
#include "runtime/core/clock.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/session.h"
#include "tests/gpu/gpu_test_util.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace shardtrain;
using namespace shardtrain::gpu_test;

namespace {

struct Case {
  const char* name;
  nn::ModelSpec spec;
  Shape sample;     // mlp/cnn: image; gpt: {T} tokens
  int64_t classes;  // gpt: vocabulary
  int64_t batch;
  bool lm = false;
};

Case mlp_case() {
  Case c{"mlp", {}, Shape{1, 28, 28}, 10, 256};
  c.spec.kind = "mlp";
  c.spec.hidden = {1024, 1024};
  return c;
}

Case cnn_case() {
  Case c{"cnn", {}, Shape{1, 28, 28}, 10, 128};
  c.spec.kind = "cnn";
  c.spec.channels = {32, 64};
  c.spec.kernel_size = 5;
  return c;
}

// The small GPT of examples/gpt_kjv.toml.
Case gpt_case() {
  Case c{"gpt", {}, Shape{64}, 256, 32, true};
  c.spec.kind = "gpt";
  c.spec.n_layer = 2;
  c.spec.n_head = 4;
  c.spec.n_embd = 128;
  return c;
}

// A wider GPT, big enough to show what the GPU does with more work per step.
Case gpt_wide_case() {
  Case c{"gpt-wide", {}, Shape{256}, 256, 32, true};
  c.spec.kind = "gpt";
  c.spec.n_layer = 6;
  c.spec.n_head = 8;
  c.spec.n_embd = 512;
  return c;
}

struct Run {
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<optim::Optimizer> opt;
  train::StepBuffers buffers;
};

Run make_run(const Case& c, Device device) {
  Run r{nn::build_model(c.spec, c.sample, c.classes), nullptr,
        c.lm ? train::StepBuffers::language_model(c.sample[0], c.classes, c.batch, device)
             : train::StepBuffers(c.sample, c.classes, c.batch, device)};
  r.model->to(device);
  r.model->initialize(7);
  // SGD with momentum: AdamW divides by sqrt(v), which turns rounding-level
  // gradient differences on elements with tiny v into lr-sized steps, so its
  // parameters are no measure of the kernels' agreement (the loss is).
  optim::OptimizerConfig oc;
  oc.kind = "sgd";
  oc.lr = 0.05f;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.0f;
  r.opt = optim::make_optimizer(oc, r.model->flat().numel(), train::optimizer_ranges(r.model->flat()),
                                device);
  return r;
}

// Batch `step`'s inputs and labels (fresh random values every step).
// The trainer's alternating input slots (StepBuffers::next_input) are used,
// so the comparison covers a batch copied while the previous step computes.
void load(const Case& c, int64_t step, train::StepBuffers& b) {
  b.next_input();
  Rng rng(stream_key(11, 0, uint64_t(step)));
  if (c.lm) {
    for (int64_t i = 0; i < b.x_host.numel(); ++i) b.x_host.i32()[i] = int32_t(rng.below(uint64_t(c.classes)));
  } else {
    for (float& v : b.x_host.f32_span()) v = rng.uniform(-1, 1);
  }
  for (int32_t& y : b.labels) y = int32_t(rng.below(uint64_t(c.classes)));
}

double step(const Case& c, Run& r, int64_t i) {
  load(c, i, r.buffers);
  const train::StepPhases p =
      train::train_step(*r.model, *r.opt, r.buffers, 0.05f, 0.0, c.batch, 1, nullptr);
  return p.loss_sum / double(r.buffers.labels.size());
}

// GEMM FLOPs of one training step (forward and backward), counted on the CPU.
double step_flops(const Case& c) {
  cpu::set_blas_threads(int(std::max(1u, std::thread::hardware_concurrency())));
  Run cpu = make_run(c, Device::cpu());
  cpu::GemmRecorder rec;
  step(c, cpu, 0);
  double flops = 0;
  for (const auto& call : rec.calls()) flops += call.flops();
  cpu::set_blas_threads(1);
  return flops;
}

void compare_with_cpu(const Case& c, const char* precision, double limit) {
  constexpr int kSteps = 5;
  set_gpu_gemm_precision(precision);
  Run cpu = make_run(c, Device::cpu());
  Run gpu_run = make_run(c, gpu());
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
  Run r = make_run(c, gpu());
  for (int i = 0; i < 3; ++i) step(c, r, i);  // warm-up: cuBLAS plans, allocator cache
  synchronize_gpu();
  constexpr int kSteps = 20;
  const double t0 = now_seconds();
  for (int i = 0; i < kSteps; ++i) step(c, r, 3 + i);
  synchronize_gpu();
  const double per_step = (now_seconds() - t0) / kSteps;
  const double tflops = flops / per_step * 1e-12;
  std::printf("GPUTRAIN model=%s precision=%s batch=%lld step_ms=%.3f samples_s=%.0f tflops=%.2f\n",
              c.name, precision, static_cast<long long>(c.batch), per_step * 1e3,
              double(c.batch) / per_step, tflops);
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
}

TEST(GpuTraining, GptMatchesCpu) {
  ST_REQUIRE_GPU();
  compare_with_cpu(gpt_case(), "f32", 1e-4);
  compare_with_cpu(gpt_case(), "tf32", 1e-2);
  compare_with_cpu(gpt_case(), "bf16", 5e-2);
}

TEST(GpuTraining, Throughput) {
  ST_REQUIRE_GPU();
  for (const Case& c : {mlp_case(), cnn_case(), gpt_case(), gpt_wide_case()}) {
    const double flops = step_flops(c);
    for (const char* p : {"f32", "tf32", "bf16"}) throughput(c, p, flops);
  }
}
