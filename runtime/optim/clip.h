// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_).
#pragma once

#include "runtime/core/tensor.h"

namespace shardtrain::optim {

// When max_norm > 0 and the L2 norm of all gradients exceeds it, the
// gradients are scaled by max_norm / (norm + 1e-6). On a GPU the norm stays
// on the device: no wait inside the step. A strategy whose gradients are
// sharded sums the per-rank squared norms first (ops::sum_squares and
// ops::clip_to_squared_norm in kernels/ops.h).
void clip_grad_norm(const Tensor& grads, double max_norm);

}  // namespace shardtrain::optim
