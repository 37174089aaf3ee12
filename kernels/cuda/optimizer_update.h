// Fused optimizer updates on the GPU (device pointers, compute stream): one
// pass over parameters, gradients and state with the math of
// kernels/cpu/optimizer_update.h (torch.optim.SGD / AdamW), the per-step
// scalars (kernels::SgdStep, AdamWStep) read from device memory, and every
// f32 operation rounded in the CPU's order (no FMA contraction), so both give
// the same bits. Reading the step's scalars on the device, not as kernel
// arguments, is what lets a captured update replay with each step's values.
#pragma once

#include "kernels/cpu/optimizer_update.h"

#include <cstdint>

namespace shardtrain::cuda {

// momentum_buf may be null when hp.momentum == 0. step: a device SgdStep
// (its floats); hp.lr is unused.
void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const cpu::SgdParams& hp,
                const float* step);

// step: a device AdamWStep (its floats); hp.lr and hp.weight_decay are
// unused.
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const cpu::AdamWParams& hp,
                  const float* step);

// Writes n <= kMaxStoredFloats host values to device memory in stream order,
// as a kernel's arguments: the host's copy is free once this returns.
constexpr int kMaxStoredFloats = 8;
void store_floats(float* dst, const float* values, int n);

}  // namespace shardtrain::cuda
