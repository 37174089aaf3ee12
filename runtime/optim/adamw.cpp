#include "runtime/optim/adamw.h"

#include "kernels/ops.h"

namespace shardtrain::optim {

AdamW::AdamW(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges)
    : ranges_(std::move(ranges)), m_(Tensor::zeros({numel})), v_(Tensor::zeros({numel})) {
  hp_.beta1 = config.beta1;
  hp_.beta2 = config.beta2;
  hp_.eps = config.eps;
  hp_.weight_decay = config.weight_decay;
  ST_CHECK(hp_.beta1 >= 0 && hp_.beta1 < 1 && hp_.beta2 >= 0 && hp_.beta2 < 1,
           "optim.beta1 and optim.beta2 must be in [0, 1), got {} and {}", hp_.beta1, hp_.beta2);
  ST_CHECK(hp_.eps > 0, "optim.eps must be positive, got {}", hp_.eps);
}

void AdamW::step(const Tensor& params, const Tensor& grads, float lr) {
  ++steps_;  // AdamW's bias correction counts steps from 1
  for (const ParamRange& r : ranges_) {
    cpu::AdamWParams hp = hp_;
    hp.lr = lr;
    if (!r.decay) hp.weight_decay = 0.0f;
    Shape s{r.numel};
    ops::adamw_update(params.view(r.offset, s), grads.view(r.offset, s), m_.view(r.offset, s),
                      v_.view(r.offset, s), hp, steps_);
  }
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  return {{"exp_avg", m_}, {"exp_avg_sq", v_}};
}

}  // namespace shardtrain::optim
