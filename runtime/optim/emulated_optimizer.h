// The optimizer of emulated compute (runtime.emulate.compute = "profile"):
// an update is a wait on the rank's ComputeClock of the profiled time per
// element it covers, so a rank that updates a shard waits for that shard's
// share; nothing is computed and no state is kept.
#pragma once

#include "runtime/optim/optimizer.h"

namespace shardtrain::optim {

class EmulatedOptimizer final : public Optimizer {
 public:
  EmulatedOptimizer(std::string emulated, double seconds_per_element, std::vector<ParamRange> ranges);
  std::string name() const override { return name_; }
  std::vector<std::pair<std::string, Tensor>> state() const override { return {}; }

 private:
  std::vector<float> step_scalars(float lr) const override { return {lr}; }
  void update_run(const Tensor& params, const Tensor& grads, int64_t offset, int64_t numel, bool decay) override;

  std::string name_;
  double seconds_per_element_;
};

}  // namespace shardtrain::optim
