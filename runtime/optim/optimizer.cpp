#include "kernels/ops.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/emulated_optimizer.h"
#include "runtime/optim/sgd.h"

#include <algorithm>
#include <cmath>

namespace shardtrain::optim {

void Optimizer::prepare(float lr) {
  if (prepared_step_ == steps_ && prepared_lr_ == lr) return;
  const std::vector<float> scalars = step_scalars(lr);
  ST_ASSERT(int64_t(scalars.size()) == scalars_.numel());
  ops::store_floats(scalars_, scalars);
  prepared_step_ = steps_;
  prepared_lr_ = lr;
}

void Optimizer::update(const Tensor& params, const Tensor& grads, float lr, int64_t begin, int64_t end) {
  prepare(lr);
  for (const ParamRange& r : ranges_) {
    const int64_t lo = std::max(begin, r.offset), hi = std::min(end, r.offset + r.numel);
    if (lo < hi) update_run(params, grads, lo, hi - lo, r.decay);
  }
}

void append_ranges_within(const std::vector<ParamRange>& full, int64_t begin, int64_t end, int64_t at,
                          std::vector<ParamRange>& out) {
  for (const ParamRange& r : full) {
    const int64_t lo = std::max(begin, r.offset), hi = std::min(end, r.offset + r.numel);
    if (lo >= hi) continue;
    const int64_t local = at + (lo - begin);
    if (!out.empty() && out.back().decay == r.decay && out.back().offset + out.back().numel == local)
      out.back().numel += hi - lo;
    else
      out.push_back({local, hi - lo, r.decay});
  }
}

void validate(const OptimizerConfig& c) {
  ST_CHECK(std::isfinite(c.lr) && c.lr > 0, "optim.lr must be positive and finite, got {}", c.lr);
  ST_CHECK(std::isfinite(c.weight_decay) && c.weight_decay >= 0, "optim.weight_decay must not be negative, got {}",
           c.weight_decay);
  ST_CHECK(c.momentum >= 0 && c.momentum < 1, "optim.momentum must be in [0, 1), got {}", c.momentum);
  ST_CHECK(c.dampening >= 0 && c.dampening <= 1, "optim.dampening must be in [0, 1], got {}", c.dampening);
  ST_CHECK(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1,
           "optim.beta1 and optim.beta2 must be in [0, 1), got {} and {}", c.beta1, c.beta2);
  ST_CHECK(std::isfinite(c.eps) && c.eps > 0, "optim.eps must be positive and finite, got {}", c.eps);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges,
                                          Device device) {
  ST_CHECK(config.lr >= 0, "optim.lr must not be negative, got {}", config.lr);
  ST_CHECK(config.weight_decay >= 0, "optim.weight_decay must not be negative, got {}", config.weight_decay);
  for (const ParamRange& r : ranges) ST_ASSERT(r.offset >= 0 && r.numel >= 0 && r.offset + r.numel <= numel);
  validate(config);
  if (config.emulated_s_per_element > 0)
    return std::make_unique<EmulatedOptimizer>(std::string(name_of(config.kind)), config.emulated_s_per_element,
                                               std::move(ranges));
  if (config.kind == OptimizerKind::adamw) return std::make_unique<AdamW>(config, numel, std::move(ranges), device);
  return std::make_unique<Sgd>(config, numel, std::move(ranges), device);
}

}  // namespace shardtrain::optim
