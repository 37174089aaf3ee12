// Fused optimizer updates: one pass over parameters, gradients and state.
// Semantics follow torch.optim.SGD and torch.optim.AdamW exactly, so results
// can be compared with PyTorch's.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;  // L2, added to the gradient (as torch.optim.SGD)
  bool nesterov = false;
};

// g' = g + wd*p; if momentum: buf = first_step ? g' : momentum*buf + (1-dampening)*g',
// g' = nesterov ? g' + momentum*buf : buf;  p -= lr*g'.
// momentum_buf may be null when momentum == 0.
void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n,
                const SgdParams& hp, bool first_step);

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // decoupled: p -= lr*wd*p
};

// step is 1-based (bias correction uses beta^step).
// p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                  const AdamWParams& hp, int64_t step);

}  // namespace shardtrain::cpu
