// Pointwise activations on the GPU (device pointers, compute stream), with
// the semantics of kernels/cpu/activation.h: forward may run in place
// (out == in), backward may too (din == dout). GELU is the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), evaluated with the same
// overflow-free sigmoid form and the same exp polynomial as the CPU.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

void relu_forward(float* out, const float* in, int64_t n);
// Uses the forward output (out > 0 <=> in > 0).
void relu_backward(float* din, const float* dout, const float* out, int64_t n);

void gelu_forward(float* out, const float* in, int64_t n);
// `in` is the forward input.
void gelu_backward(float* din, const float* dout, const float* in, int64_t n);

}  // namespace shardtrain::cuda
