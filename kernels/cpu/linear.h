// Fully connected layer, PyTorch layout: weight [OC, IC], bias [OC].
//   out[N,OC] = in[N,IC] * weight^T + bias
// Bias is fused: out is filled with the bias rows, then one GEMM with beta=1.
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::cpu {

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC);

// din (may be null: the first layer needs no input gradient) is overwritten.
// dweight and dbias (dbias may be null) are overwritten, or added to when
// `accumulate` (gradient accumulation over micro-batches).
void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate);

// The same products on operands rounded to bf16 once (gemm_bf16; only where
// bf16_operand_products()): the input and the output's gradient as the
// caller holds them when they are bf16 already (mixed precision's
// activations), each read by both of the backward's products without a
// second rounding. The same results as the f32 forms in bf16 precision.
// The bias gradient is not computed here: bias_gradient, on the gradient's
// own values.
void linear_forward_bf16(float* out, const bf16* in, const bf16* weight, const float* bias, int64_t N, int64_t IC,
                         int64_t OC);
void linear_backward_bf16(float* din, float* dweight, const bf16* dout, const bf16* in, const bf16* weight, int64_t N,
                          int64_t IC, int64_t OC, bool accumulate);

// dbias (+)= the column sums of dout [N, OC], rows in order (deterministic).
void bias_gradient(float* dbias, const float* dout, int64_t N, int64_t OC, bool accumulate);
void bias_gradient(float* dbias, const bf16* dout, int64_t N, int64_t OC, bool accumulate);

}  // namespace shardtrain::cpu
