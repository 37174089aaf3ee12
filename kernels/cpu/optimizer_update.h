// Fused optimizer updates: one pass over parameters, gradients and state.
// Semantics follow torch.optim.SGD and torch.optim.AdamW exactly, so results
// can be compared with PyTorch's.
#pragma once

#include "kernels/kernel_params.h"

#include <cstdint>

namespace shardtrain::cpu {

using kernels::SgdParams;

// g' = g + wd*p; if momentum: buf = first_step ? g' : momentum*buf + (1-dampening)*g',
// g' = nesterov ? g' + momentum*buf : buf;  p -= lr*g'.
// momentum_buf may be null when momentum == 0.
void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdParams& hp, bool first_step);
// The same with the step's scalars given (kernels::SgdStep; hp.lr unused).
void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdParams& hp,
                const kernels::SgdStep& step);

using kernels::AdamWParams;

// step is 1-based (bias correction uses beta^step).
// p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp, int64_t step);
// The same with the step's scalars given (kernels::AdamWStep; hp.lr and
// hp.weight_decay unused).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp,
                  const kernels::AdamWStep& step);

}  // namespace shardtrain::cpu
