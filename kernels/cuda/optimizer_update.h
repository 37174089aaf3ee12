// Fused optimizer updates on the GPU (device pointers, compute stream): one
// pass over parameters, gradients and state with the math of
// kernels/cpu/optimizer_update.h (torch.optim.SGD / AdamW), the per-call
// scalars computed on the host in double exactly as there, and every f32
// operation rounded in the CPU's order (no FMA contraction), so both give the
// same bits.
#pragma once

#include "kernels/cpu/optimizer_update.h"

#include <cstdint>

namespace shardtrain::cuda {

// momentum_buf may be null when hp.momentum == 0.
void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const cpu::SgdParams& hp,
                bool first_step);

// step is 1-based.
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const cpu::AdamWParams& hp,
                  int64_t step);

}  // namespace shardtrain::cuda
