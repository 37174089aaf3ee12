// Causal multi-head self-attention on the GPU, the math of
// cpu::attention_forward / cpu::attention_backward (kernels/cpu/attention.h):
//   qkv [B, T, 3C]: q in channels [0, C), k in [C, 2C), v in [2C, 3C);
//   head h uses channels [h*hs, (h+1)*hs) of each (hs = C / NH).
//   att[b,h,t,:] = softmax_{j<=t}(q_t . k_j / sqrt(hs))   (0 for j > t)
//   out[b,t,h*hs:(h+1)*hs] = sum_j att[b,h,t,j] v_j
// The products are strided-batched GEMMs: over the heads of one sample with
// a host loop over the samples, or over the samples of one head with a loop
// over the heads, whichever makes fewer launches (min(B, NH) per stage); the
// softmax is one block per row. Device pointers, work on compute_stream().
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// out [B, T, C] and att [B, NH, T, T] (the probabilities) are overwritten.
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH);

// dqkv [B, T, 3C] is overwritten. The score gradients of one group (the NH
// heads of a sample, or one head over the B samples: max(B, NH)*T*T floats
// at most) live in cuda::scratch(ScratchSlot::reduce) for the call.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int64_t B, int64_t T,
                        int64_t C, int64_t NH);

}  // namespace shardtrain::cuda
