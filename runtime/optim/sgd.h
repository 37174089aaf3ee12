// SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD).
#pragma once

#include "kernels/cpu/optimizer_update.h"
#include "runtime/optim/optimizer.h"

namespace shardtrain::optim {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges);
  std::string name() const override { return "sgd"; }
  void step(const Tensor& params, const Tensor& grads, float lr) override;
  std::vector<std::pair<std::string, Tensor>> state() const override;

 private:
  cpu::SgdParams hp_;
  std::vector<ParamRange> ranges_;
  Tensor momentum_;  // undefined when momentum == 0
};

}  // namespace shardtrain::optim
