// Fully connected layer, PyTorch layout: weight [OC, IC], bias [OC].
//   out[N,OC] = in[N,IC] * weight^T + bias
// Bias is fused: out is filled with the bias rows, then one GEMM with beta=1.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC);

// din (may be null: the first layer needs no input gradient) is overwritten.
// dweight and dbias (dbias may be null) are overwritten, or added to when
// `accumulate` (gradient accumulation over micro-batches).
void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate);

}  // namespace shardtrain::cpu
