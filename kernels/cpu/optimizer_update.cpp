#include "kernels/cpu/optimizer_update.h"

#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <algorithm>

namespace shardtrain::cpu {
namespace {

// torch.optim.SGD with momentum, one loop per (first step, nesterov) case so
// that the loop body has no branches; each line is one of torch's tensor ops:
//   g' = g.add(p, alpha=wd)
//   buf = clone(g')  |  buf.mul_(momentum).add_(g', alpha=1-dampening)
//   g' = g'.add(buf, alpha=momentum)  |  buf
//   p.add_(g', alpha=-lr)
template <bool kFirst, bool kNesterov>
void sgd_momentum(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n, float lr, float wd,
                  float momentum, float keep) {
  for (int64_t i = 0; i < n; ++i) {
    const float d = g[i] + wd * p[i];
    const float b = kFirst ? d : buf[i] * momentum + keep * d;
    buf[i] = b;
    const float step = kNesterov ? d + momentum * b : b;
    p[i] = p[i] - lr * step;
  }
}

}  // namespace

void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdParams& hp, bool first_step) {
  sgd_update(param, grad, momentum_buf, n, hp, kernels::SgdStep::of(hp, first_step));
}

void sgd_update(float* __restrict param, const float* __restrict grad, float* momentum_buf, int64_t n,
                const SgdParams& hp, const kernels::SgdStep& step) {
  const float lr = step.lr, wd = hp.weight_decay, mu = hp.momentum;
  const bool first_step = step.first != 0.0f;
  if (mu == 0.0f) {
    for (int64_t i = 0; i < n; ++i) param[i] = param[i] - lr * (grad[i] + wd * param[i]);
    return;
  }
  ST_CHECK(momentum_buf != nullptr, "sgd_update: momentum {} needs a momentum buffer", mu);
  const float keep = float(1.0 - double(hp.dampening));
  auto* loop = first_step ? (hp.nesterov ? &sgd_momentum<true, true> : &sgd_momentum<true, false>)
                          : (hp.nesterov ? &sgd_momentum<false, true> : &sgd_momentum<false, false>);
  loop(param, grad, momentum_buf, n, lr, wd, mu, keep);
}

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp, int64_t step) {
  ST_CHECK(step >= 1, "adamw_update: step {} (steps count from 1)", step);
  adamw_update(param, grad, m, v, n, hp, kernels::AdamWStep::of(hp, step));
}

void adamw_update(float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
                  int64_t n, const AdamWParams& hp, const kernels::AdamWStep& step) {
  const float decay = step.decay, step_size = step.step_size, bc2_sqrt = step.bc2_sqrt;
  const double b1 = hp.beta1, b2 = hp.beta2;
  const float w1 = float(1.0 - b1), w2 = float(1.0 - b2), beta2 = hp.beta2, eps = hp.eps;
  // Blocks of 256 stay in L1 between the three short loops: memory is read
  // and written once, and the square roots go through the SIMD helper.
  constexpr int64_t kBlock = 256;
  float root_v[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = std::min(kBlock, n - i0);
    float* __restrict p = param + i0;
    const float* __restrict g = grad + i0;
    float* __restrict mb = m + i0;
    float* __restrict vb = v + i0;
    // m.lerp_(g, 1-b1) (torch's lerp: m + w*(g - m) for w < 0.5);
    // v.mul_(b2).addcmul_(g, g, value=1-b2).
    for (int64_t i = 0; i < len; ++i) {
      mb[i] = mb[i] + w1 * (g[i] - mb[i]);
      vb[i] = vb[i] * beta2 + w2 * g[i] * g[i];
    }
    detail::sqrt_n(root_v, vb, len);
    // p.mul_(1 - lr*wd) (decoupled decay, first); denom = sqrt(v)/sqrt(bc2) + eps;
    // p.addcdiv_(m, denom, value=-lr/bc1).
    for (int64_t i = 0; i < len; ++i) p[i] = p[i] * decay - step_size * mb[i] / (root_v[i] / bc2_sqrt + eps);
  }
}

}  // namespace shardtrain::cpu
