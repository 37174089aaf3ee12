#include "runtime/optim/sgd.h"

#include "kernels/ops.h"

namespace shardtrain::optim {

Sgd::Sgd(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges)
    : ranges_(std::move(ranges)) {
  hp_.momentum = config.momentum;
  hp_.dampening = config.dampening;
  hp_.weight_decay = config.weight_decay;
  hp_.nesterov = config.nesterov;
  ST_CHECK(!hp_.nesterov || (hp_.momentum > 0 && hp_.dampening == 0),
           "optim.nesterov needs optim.momentum > 0 and optim.dampening = 0");
  if (hp_.momentum != 0.0f) momentum_ = Tensor::zeros({numel});
}

void Sgd::step(const Tensor& params, const Tensor& grads, float lr) {
  for (const ParamRange& r : ranges_) {
    cpu::SgdParams hp = hp_;
    hp.lr = lr;
    if (!r.decay) hp.weight_decay = 0.0f;
    Shape s{r.numel};
    ops::sgd_update(params.view(r.offset, s), grads.view(r.offset, s),
                    momentum_.defined() ? momentum_.view(r.offset, s) : Tensor(), hp, steps_ == 0);
  }
  ++steps_;
}

std::vector<std::pair<std::string, Tensor>> Sgd::state() const {
  if (!momentum_.defined()) return {};
  return {{"momentum", momentum_}};
}

}  // namespace shardtrain::optim
