// Optimizers over flat parameter buffers. They never see parameters one by
// one: they see ranges of the flat buffer (ParamRange), which is what lets the
// same code step the full model (DDP) or one rank's shard (FSDP).
#pragma once

#include "runtime/core/tensor.h"

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

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" | "adamw"
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
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One update of `params` from `grads` (the flat buffers the ranges index)
  // at learning rate lr. Padding outside every range is never touched.
  virtual void step(const Tensor& params, const Tensor& grads, float lr) = 0;
  // Named state buffers (momentum, moments), for checkpoints.
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  int64_t steps_taken() const { return steps_; }

 protected:
  int64_t steps_ = 0;
};

// Builds the optimizer the config names; its state covers `numel` elements.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t numel,
                                          std::vector<ParamRange> ranges);

}  // namespace shardtrain::optim
