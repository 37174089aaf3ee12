// Pointwise activations. Forward may run in place (out == in).
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

void relu_forward(float* out, const float* in, int64_t n);
// Uses the forward output (out > 0 <=> in > 0), so the input need not be kept.
// din may alias dout.
void relu_backward(float* din, const float* dout, const float* out, int64_t n);

// GELU, tanh approximation (as GPT-2 and llm.c): 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
void gelu_forward(float* out, const float* in, int64_t n);
// din may alias dout; `in` is the forward input.
void gelu_backward(float* din, const float* dout, const float* in, int64_t n);

}  // namespace shardtrain::cpu
