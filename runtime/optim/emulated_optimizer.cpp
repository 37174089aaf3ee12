#include "runtime/optim/emulated_optimizer.h"

#include "runtime/core/compute_clock.h"

namespace shardtrain::optim {

EmulatedOptimizer::EmulatedOptimizer(std::string emulated, double seconds_per_element, std::vector<ParamRange> ranges)
    : Optimizer(std::move(ranges), 1, Device::cpu()),
      name_(std::move(emulated) + " (emulated)"),
      seconds_per_element_(seconds_per_element) {}

void EmulatedOptimizer::update_run(const Tensor&, const Tensor&, int64_t, int64_t numel, bool) {
  compute_clock().run(seconds_per_element_ * double(numel));
}

}  // namespace shardtrain::optim
