// Causal multi-head self-attention through cuDNN's fused (flash) attention:
// the math of kernels/cuda/attention.h without the B x NH x T x T
// probabilities. Q, K and V are read in bf16, the softmax runs in f32 inside
// the kernel, and only its log-sum-exp per row (B x NH x T floats) is kept
// for the backward, which recomputes the probabilities.
//
// The tensors stay f32 (qkv [B, T, 3C] in, out [B, T, C]): the forward
// rounds qkv to bf16 and widens O back to f32, the backward rounds dO and
// widens dQKV. Q, K and V are strided views of the one qkv buffer (head h at
// channel h*hs of each third), as cuDNN's tensor strides allow, so nothing
// is transposed.
//
// cuDNN is loaded at run time (dlopen of libcudnn.so.9); a build without the
// frontend headers, a machine without cuDNN, or a shape cuDNN does not
// support makes fused_attention_unavailable() say why, and the caller uses
// the materialized kernels. Device pointers, compute stream.
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::cuda {

// "" when the fused kernels run for this shape (their cuDNN graphs built and
// cached), otherwise why not.
std::string fused_attention_unavailable(int64_t B, int64_t T, int64_t C, int64_t NH);

// Bytes the forward keeps in `saved` for the backward: the log-sum-exp rows
// and the bf16 qkv and O.
size_t fused_attention_saved_bytes(int64_t B, int64_t T, int64_t C, int64_t NH);

// out [B, T, C] is overwritten; `saved` holds fused_attention_saved_bytes.
void fused_attention_forward(float* out, void* saved, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH);

// dqkv [B, T, 3C] is overwritten from dout [B, T, C] and what the forward
// saved.
void fused_attention_backward(float* dqkv, const float* dout, const void* saved, int64_t B, int64_t T, int64_t C,
                              int64_t NH);

}  // namespace shardtrain::cuda
