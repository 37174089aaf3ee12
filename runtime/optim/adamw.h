// AdamW: Adam with decoupled weight decay (torch.optim.AdamW).
#pragma once

#include "kernels/kernel_params.h"
#include "runtime/optim/optimizer.h"

namespace shardtrain::optim {

class AdamW final : public Optimizer {
 public:
  AdamW(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges, Device device = Device::cpu());
  std::string name() const override { return "adamw"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;

 private:
  // Two AdamWStep: with weight decay, then without.
  std::vector<float> step_scalars(float lr) const override;
  void update_run(const Tensor& params, const Tensor& grads, int64_t offset, int64_t numel, bool decay) override;

  kernels::AdamWParams hp_;
  Tensor m_, v_;
};

}  // namespace shardtrain::optim
