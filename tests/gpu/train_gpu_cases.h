// The reference models as GPU test cases (the MLP, the CNN, the GPTs and the
// Llama of gpu-check's training rows): a model with SGD-momentum on a device, its step
// buffers, and a step on fresh random batches. Shared by the GPU training
// tests.
#pragma once

#include "kernels/cpu/gemm.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/core/rng.h"
#include "runtime/parallel/ddp.h"
#include "runtime/parallel/none_strategy.h"
#include "runtime/train/session.h"

#include <algorithm>
#include <memory>
#include <thread>

namespace shardtrain::gpu_test {

struct Case {
  const char* name;
  nn::ModelSpec spec;
  Shape sample;     // mlp/cnn: image; gpt: {T} tokens
  int64_t classes;  // gpt: vocabulary
  int64_t batch;
  bool lm = false;
  double clip = 0.0;  // optim.clip_grad_norm (0: off)
};

inline Case mlp_case() {
  Case c{"mlp", {}, Shape{1, 28, 28}, 10, 256};
  c.spec.kind = nn::ModelKind::mlp;
  c.spec.hidden = {1024, 1024};
  return c;
}

inline Case cnn_case() {
  Case c{"cnn", {}, Shape{1, 28, 28}, 10, 128};
  c.spec.kind = nn::ModelKind::cnn;
  c.spec.channels = {32, 64};
  c.spec.kernel_size = 5;
  return c;
}

// A byte-level GPT over T tokens, batch 32.
inline Case gpt_case(const char* name, int64_t T, int64_t layers, int64_t heads, int64_t channels) {
  Case c{name, {}, Shape{T}, 256, 32, true};
  c.spec.kind = nn::ModelKind::gpt;
  c.spec.n_layer = layers;
  c.spec.n_head = heads;
  c.spec.n_embd = channels;
  return c;
}

// The small GPT of examples/gpt_kjv.toml.
inline Case gpt_case() { return gpt_case("gpt", 64, 2, 4, 128); }

// A wider GPT, big enough to show what the GPU does with more work per step.
inline Case gpt_wide_case() { return gpt_case("gpt-wide", 256, 6, 8, 512); }

// The small Llama of examples/llama_kjv.toml (multi-head: n_kv_head =
// n_head), on a byte-level T = 64.
inline Case llama_case() {
  Case c{"llama", {}, Shape{64}, 256, 32, true};
  c.spec.kind = nn::ModelKind::llama;
  c.spec.n_layer = 2;
  c.spec.n_head = 4;
  c.spec.n_embd = 128;
  c.spec.ffn_hidden = 352;
  return c;
}

struct ModelRun {
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<optim::Optimizer> opt;
  train::StepBuffers buffers;
};

inline ModelRun make_run(const Case& c, Device device) {
  ModelRun r{nn::build_model(c.spec, c.sample, c.classes), nullptr,
             c.lm ? train::StepBuffers::language_model(c.sample[0], c.classes, c.batch, device)
                  : train::StepBuffers(c.sample, c.classes, c.batch, device)};
  r.model->to(device);
  r.model->initialize(7);
  // SGD with momentum: AdamW divides by sqrt(v), which turns rounding-level
  // gradient differences on elements with tiny v into lr-sized steps, so its
  // parameters are no measure of the kernels' agreement (the loss is).
  optim::OptimizerConfig oc;
  oc.kind = optim::OptimizerKind::sgd;
  oc.lr = 0.05f;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.0f;
  r.opt = optim::make_optimizer(oc, r.model->flat().numel(), train::optimizer_ranges(r.model->flat()), device);
  return r;
}

// Batch `step`'s inputs and labels (fresh random values every step).
// The trainer's alternating input slots (StepBuffers::next_input) are used,
// so the comparison covers a batch copied while the previous step computes.
inline void load(const Case& c, int64_t step, train::StepBuffers& b) {
  b.next_input();
  Rng rng(stream_key(11, 0, uint64_t(step)));
  if (c.lm) {
    for (int64_t i = 0; i < b.x_host.numel(); ++i) b.x_host.i32()[i] = int32_t(rng.below(uint64_t(c.classes)));
  } else {
    for (float& v : b.x_host.f32_span()) v = rng.uniform(-1, 1);
  }
  for (int32_t& y : b.labels) y = int32_t(rng.below(uint64_t(c.classes)));
}

// One optimizer step on batch i; the mean loss of the batch. With ddp, its
// gradients are all-reduced (this rank's batch is the whole global batch:
// the tests run one rank).
inline double step(const Case& c, ModelRun& r, int64_t i, parallel::Ddp* ddp = nullptr) {
  load(c, i, r.buffers);
  parallel::NoneStrategy alone(*r.model);
  const train::StepPhases p = train::train_step(*r.model, *r.opt, r.buffers, 0.05f, c.clip, c.batch, 1,
                                                ddp ? static_cast<parallel::Strategy&>(*ddp) : alone);
  return p.loss_sum / double(r.buffers.labels.size());
}

// Product FLOPs (GEMMs and convolutions) of one training step (forward and
// backward), counted on the CPU.
inline double step_flops(const Case& c) {
  cpu::set_blas_threads(int(std::max(1u, std::thread::hardware_concurrency())));
  ModelRun cpu = make_run(c, Device::cpu());
  cpu::GemmRecorder rec;
  step(c, cpu, 0);
  const double flops = rec.flops();
  cpu::set_blas_threads(1);
  return flops;
}

}  // namespace shardtrain::gpu_test
