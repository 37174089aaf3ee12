#include "runtime/optim/adamw.h"

#include "kernels/ops.h"

namespace shardtrain::optim {

AdamW::AdamW(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges, Device device)
    : Optimizer(std::move(ranges), int64_t{2} * kernels::AdamWStep::kFloats, device),
      m_(Tensor::zeros({numel}, DType::f32, device)),
      v_(Tensor::zeros({numel}, DType::f32, device)) {
  hp_.beta1 = config.beta1;
  hp_.beta2 = config.beta2;
  hp_.eps = config.eps;
  hp_.weight_decay = config.weight_decay;
  ST_CHECK(hp_.beta1 >= 0 && hp_.beta1 < 1 && hp_.beta2 >= 0 && hp_.beta2 < 1,
           "optim.beta1 and optim.beta2 must be in [0, 1), got {} and {}", hp_.beta1, hp_.beta2);
  ST_CHECK(hp_.eps > 0, "optim.eps must be positive, got {}", hp_.eps);
}

std::vector<float> AdamW::step_scalars(float lr) const {
  kernels::AdamWParams hp = hp_;
  hp.lr = lr;
  // AdamW's bias correction counts steps from 1: this is step steps_ + 1.
  const auto with = kernels::AdamWStep::of(hp, steps_ + 1).floats();
  hp.weight_decay = 0.0f;
  const auto without = kernels::AdamWStep::of(hp, steps_ + 1).floats();
  std::vector<float> out(with.begin(), with.end());
  out.insert(out.end(), without.begin(), without.end());
  return out;
}

void AdamW::update_run(const Tensor& params, const Tensor& grads, int64_t offset, int64_t numel, bool decay) {
  const Shape s{numel};
  constexpr int64_t n = kernels::AdamWStep::kFloats;
  ops::adamw_update(params.view(offset, s), grads.view(offset, s), m_.view(offset, s), v_.view(offset, s), hp_,
                    scalars_.view(decay ? 0 : n, {n}));
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }

}  // namespace shardtrain::optim
