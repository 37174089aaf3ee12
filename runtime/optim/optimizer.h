// Optimizers over flat parameter buffers. They never see parameters one by
// one: they see ranges of the flat buffer (ParamRange), which is what lets the
// same code step the full model (DDP) or one rank's shard (FSDP).
#pragma once

#include "runtime/core/enum_names.h"
#include "runtime/core/tensor.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain::optim {

// A run of the flat buffer with one weight-decay setting.
struct ParamRange {
  int64_t offset = 0;
  int64_t numel = 0;
  bool decay = true;
};

enum class OptimizerKind { sgd, adamw };
inline std::span<const EnumName<OptimizerKind>> enum_names(OptimizerKind) {
  static constexpr std::array<EnumName<OptimizerKind>, 2> n = {
      {{OptimizerKind::sgd, "sgd"}, {OptimizerKind::adamw, "adamw"}}};
  return n;
}

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  float lr = 0.05f;
  float weight_decay = 0.0f;
  // sgd
  float momentum = 0.9f;
  float dampening = 0.0f;
  bool nesterov = false;
  // adamw
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  // Not a config key: with runtime.emulate.compute = "profile" the job sets
  // the profiled update time per element, and make_optimizer makes an
  // EmulatedOptimizer (emulated_optimizer.h) that waits it.
  double emulated_s_per_element = 0.0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;

  // One update of `params` from `grads` (the flat buffers the ranges index)
  // at learning rate lr. Padding outside every range is never touched.
  void step(const Tensor& params, const Tensor& grads, float lr) {
    update(params, grads, lr, 0, params.numel());
    finish_step();
  }

  // A step in pieces, so that each piece can run as soon as its gradients
  // are ready (DDP: a bucket as soon as its all-reduce completed): update()
  // the parts of the ranges inside elements [begin, end), each element once
  // per step, then finish_step().
  void update(const Tensor& params, const Tensor& grads, float lr, int64_t begin, int64_t end);
  void finish_step() { ++steps_; }

  // Writes the step's scalars at learning rate lr (the rate, the step
  // count's bias corrections: kernels::SgdStep, AdamWStep) to the
  // optimizer's device, in stream order, where its update kernels read
  // them. The first update() of a step does it; a trainer that captures
  // the update into a CUDA graph calls it ahead of the capture and of each
  // replay, so the write stays outside the graph and every replay reads the
  // step's own values. Again only when the step or lr changed.
  void prepare(float lr);

  // Named state buffers (momentum, moments), for checkpoints.
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  int64_t steps_taken() const { return steps_; }
  // Resuming from a checkpoint: the steps its state had taken (SGD's first
  // step sets the momentum, AdamW's bias correction counts them).
  void set_steps_taken(int64_t steps) { steps_ = steps; }

 protected:
  // step_floats: the size of the step's scalars, on `device`.
  Optimizer(std::vector<ParamRange> ranges, int64_t step_floats, Device device)
      : ranges_(std::move(ranges)), scalars_(Tensor::zeros({step_floats}, DType::f32, device)) {}
  // The step's scalars at lr for the step after the steps_ finished, as
  // update_run reads them from scalars_.
  virtual std::vector<float> step_scalars(float lr) const = 0;
  // The fused update of one contiguous run [offset, offset + numel) that
  // shares a weight-decay setting, with the scalars prepare() wrote.
  virtual void update_run(const Tensor& params, const Tensor& grads, int64_t offset, int64_t numel, bool decay) = 0;

  std::vector<ParamRange> ranges_;
  int64_t steps_ = 0;
  Tensor scalars_;

 private:
  int64_t prepared_step_ = -1;  // the steps_ and lr scalars_ holds
  float prepared_lr_ = 0.0f;
};

// f32 state values the optimizer keeps per parameter: AdamW 2 (moments), SGD
// 1 with momentum, else 0.
inline int state_floats_per_param(const OptimizerConfig& c) {
  return c.kind == OptimizerKind::adamw ? 2 : c.momentum > 0 ? 1 : 0;
}

// An Error naming the [optim] key out of range (not finite, negative, a
// decay outside [0, 1)).
void validate(const OptimizerConfig& config);

// The parts of `full` inside elements [begin, end) of the flat buffer,
// appended to `out` at offset `at` + (element - begin): the ranges of an
// optimizer over a shard or slice holding those elements from `at` on. A run
// that continues the last one of `out` with the same weight decay extends it.
void append_ranges_within(const std::vector<ParamRange>& full, int64_t begin, int64_t end, int64_t at,
                          std::vector<ParamRange>& out);

// Builds the optimizer the config names; its state covers `numel` elements
// and lives on `device` (where the parameters it steps live).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges,
                                          Device device = Device::cpu());

}  // namespace shardtrain::optim
