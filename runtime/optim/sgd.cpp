#include "runtime/optim/sgd.h"

#include "kernels/ops.h"

namespace shardtrain::optim {

Sgd::Sgd(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges, Device device)
    : Optimizer(std::move(ranges), kernels::SgdStep::kFloats, device) {
  hp_.momentum = config.momentum;
  hp_.dampening = config.dampening;
  hp_.weight_decay = config.weight_decay;
  hp_.nesterov = config.nesterov;
  ST_CHECK(!hp_.nesterov || (hp_.momentum > 0 && hp_.dampening == 0),
           "optim.nesterov needs optim.momentum > 0 and optim.dampening = 0");
  hp_without_decay_ = hp_;
  hp_without_decay_.weight_decay = 0.0f;
  if (hp_.momentum != 0.0f) momentum_ = Tensor::zeros({numel}, DType::f32, device);
}

std::vector<float> Sgd::step_scalars(float lr) const {
  kernels::SgdParams hp = hp_;
  hp.lr = lr;
  // The first step sets the momentum buffer instead of blending into it.
  const auto s = kernels::SgdStep::of(hp, steps_ == 0).floats();
  return {s.begin(), s.end()};
}

void Sgd::update_run(const Tensor& params, const Tensor& grads, int64_t offset, int64_t numel, bool decay) {
  const Shape s{numel};
  ops::sgd_update(params.view(offset, s), grads.view(offset, s),
                  momentum_.defined() ? momentum_.view(offset, s) : Tensor(), decay ? hp_ : hp_without_decay_,
                  scalars_);
}

std::vector<std::pair<std::string, Tensor>> Sgd::state() const {
  if (!momentum_.defined()) return {};
  return {{"momentum", momentum_}};
}

}  // namespace shardtrain::optim
