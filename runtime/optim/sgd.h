// SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD).
#pragma once

#include "kernels/kernel_params.h"
#include "runtime/optim/optimizer.h"

namespace shardtrain::optim {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges, Device device = Device::cpu());
  std::string name() const override { return "sgd"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;

 private:
  std::vector<float> step_scalars(float lr) const override;
  void update_run(const Tensor& params, const Tensor& grads, int64_t offset, int64_t numel, bool decay) override;

  kernels::SgdParams hp_;
  kernels::SgdParams hp_without_decay_;
  Tensor momentum_;  // undefined when momentum == 0
};

}  // namespace shardtrain::optim
