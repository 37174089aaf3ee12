#include "runtime/optim/sgd.h"

#include "kernels/ops.h"

namespace shardtrain::optim {

Sgd::Sgd(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges, Device device)
    : Optimizer(std::move(ranges)) {
  hp_.momentum = config.momentum;
  hp_.dampening = config.dampening;
  hp_.weight_decay = config.weight_decay;
  hp_.nesterov = config.nesterov;
  ST_CHECK(!hp_.nesterov || (hp_.momentum > 0 && hp_.dampening == 0),
           "optim.nesterov needs optim.momentum > 0 and optim.dampening = 0");
  if (hp_.momentum != 0.0f) momentum_ = Tensor::zeros({numel}, DType::f32, device);
}

void Sgd::update_run(const Tensor& params, const Tensor& grads, float lr, int64_t offset, int64_t numel, bool decay) {
  kernels::SgdParams hp = hp_;
  hp.lr = lr;
  if (!decay) hp.weight_decay = 0.0f;
  const Shape s{numel};
  ops::sgd_update(params.view(offset, s), grads.view(offset, s),
                  momentum_.defined() ? momentum_.view(offset, s) : Tensor(), hp, steps_ == 0);
}

std::vector<std::pair<std::string, Tensor>> Sgd::state() const {
  if (!momentum_.defined()) return {};
  return {{"momentum", momentum_}};
}

}  // namespace shardtrain::optim
