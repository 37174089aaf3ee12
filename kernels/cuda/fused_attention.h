// Causal multi-head self-attention through cuDNN's fused (flash) attention:
// the math of kernels/cuda/attention.h without the B x NH x T x T
// probabilities. Q, K and V are read in bf16, the softmax runs in f32 inside
// the kernel, and only its log-sum-exp per row (B x NH x T floats) is kept
// for the backward, which recomputes the probabilities.
//
// The tensors are f32 (qkv [B, T, 3C] in, out [B, T, C]), or bf16 where
// the caller says. f32 ones are rounded into bf16 copies the forward keeps
// for the backward (the backward rounds dO and widens dQKV the same way);
// bf16 ones (mixed precision's activations) are read and written where they
// are, and the backward is given them again. Q, K and V are strided views
// of the one qkv buffer (head h at channel h*hs of each third), as cuDNN's
// tensor strides allow, so nothing is transposed.
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

// Bytes the forward keeps in `saved` for the backward: the log-sum-exp
// rows, and with f32 qkv and out their bf16 copies.
size_t fused_attention_saved_bytes(int64_t B, int64_t T, int64_t C, int64_t NH, bool bf16_io = false);

// out [B, T, C] is overwritten; `saved` holds fused_attention_saved_bytes.
// With bf16_io, qkv and out hold bf16 values: cuDNN reads Q, K and V from
// qkv and writes O into out, no copies; the backward reads both again.
void fused_attention_forward(void* out, void* saved, const void* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                             bool bf16_io = false);

// dqkv [B, T, 3C] is overwritten from dout [B, T, C] (f32) and what the
// forward saved. With bf16_io, qkv and out are the forward's bf16 tensors,
// unchanged since; otherwise they are not read (the copies in `saved` are).
// With dqkv_bf16 cuDNN writes bf16 dqkv in place.
void fused_attention_backward(void* dqkv, const float* dout, const void* saved, const void* qkv, const void* out,
                              int64_t B, int64_t T, int64_t C, int64_t NH, bool bf16_io = false,
                              bool dqkv_bf16 = false);

}  // namespace shardtrain::cuda
