// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_).
#pragma once

#include "runtime/core/tensor.h"

namespace shardtrain::optim {

// L2 norm of all gradients; when max_norm > 0 and the norm exceeds it, the
// gradients are scaled by max_norm / (norm + 1e-6). Returns the norm before
// clipping. A strategy whose gradients are sharded combines the per-rank
// squared norms first (sum_squares in kernels/ops.h) and calls clip_to_norm.
double clip_grad_norm(const Tensor& grads, double max_norm);
void clip_to_norm(const Tensor& grads, double norm, double max_norm);

}  // namespace shardtrain::optim
