// Causal multi-head self-attention over x [B, T, C] with NH heads of size
// hs = C / NH, after a fused qkv projection (done by the linear kernel):
//   qkv [B, T, 3C]: q in channels [0, C), k in [C, 2C), v in [2C, 3C);
//   head h uses channels [h*hs, (h+1)*hs) of each.
//   att[b,h,t,:] = softmax_{j<=t}(q_t . k_j / sqrt(hs))   (0 for j > t)
//   out[b,t,h*hs:(h+1)*hs] = sum_j att[b,h,t,j] v_j
// The score and weighted-sum products are GEMMs (one per batch and head);
// the softmax subtracts each row's max. Math as in llm.c's attention.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// out [B, T, C] and att [B, NH, T, T] (the probabilities, kept for backward)
// are overwritten.
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH);

// dqkv [B, T, 3C] is overwritten. scratch: T*T floats of workspace. qkv and
// att are the forward's input and probabilities.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int64_t B,
                        int64_t T, int64_t C, int64_t NH);

}  // namespace shardtrain::cpu
