// Causal self-attention through cuDNN's fused (flash) attention: the math
// of kernels/cuda/attention.h without the B x NH x T x T probabilities, and
// with grouped-query heads as kernels/cpu/flash_attention.h has them. Q, K
// and V are read in bf16, the softmax runs in f32 inside the kernel, and
// only its log-sum-exp per row (B x NH x T floats) is kept for the backward,
// which recomputes the probabilities.
//
// Heads: NH query heads of hs = C / NH channels, and NKV key/value heads
// (NKV = 0 means NH; NKV divides NH and query head h reads key/value head
// h / (NH / NKV)). cuDNN's SDPA takes K and V with fewer heads than Q, so
// the shared heads are read where they are, never repeated per query head.
// qkv [B, T, (NH + 2 NKV) hs] holds the query heads in columns [0, C), then
// the NKV key heads, then the NKV value heads (head j at channel j*hs of its
// part); out is [B, T, C]; dqkv is laid out like qkv, its key and value
// heads summed over their group's query heads.
//
// The tensors are f32, or bf16 where the caller says. f32 ones are rounded
// into bf16 copies the forward keeps for the backward (the backward rounds
// dO and widens dQKV the same way); bf16 ones (mixed precision's
// activations) are read and written where they are, and the backward is
// given them again. Q, K and V are strided views of the one qkv buffer, as
// cuDNN's tensor strides allow, so nothing is transposed.
//
// cuDNN is loaded at run time (dlopen of libcudnn.so.9); a build without the
// frontend headers, a machine without cuDNN, or a shape cuDNN does not
// support (a head size, a grouping, what a cuDNN version or GPU declines)
// makes fused_attention_unavailable() say why, and the caller picks another
// kernel (kernels/ops.h's attention_kernel). Device pointers, compute
// stream.
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::cuda {

// "" when the fused kernels run for this shape (their cuDNN graphs built and
// cached), otherwise why not.
std::string fused_attention_unavailable(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t NKV = 0);

// Bytes the forward keeps in `saved` for the backward: the log-sum-exp
// rows, and with f32 qkv and out their bf16 copies (qkv's of its
// (NH + 2 NKV) hs channels a token).
size_t fused_attention_saved_bytes(int64_t B, int64_t T, int64_t C, int64_t NH, bool bf16_io = false, int64_t NKV = 0);

// out [B, T, C] is overwritten; `saved` holds fused_attention_saved_bytes
// of the same shape. With bf16_io, qkv and out hold bf16 values: cuDNN reads
// Q, K and V from qkv and writes O into out, no copies; the backward reads
// both again.
void fused_attention_forward(void* out, void* saved, const void* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                             bool bf16_io = false, int64_t NKV = 0);

// dqkv [B, T, (NH + 2 NKV) hs] is overwritten from dout [B, T, C] (f32) and
// what the forward saved. With bf16_io, qkv and out are the forward's bf16
// tensors, unchanged since; otherwise they are not read (the copies in
// `saved` are). With dqkv_bf16 cuDNN writes bf16 dqkv in place.
void fused_attention_backward(void* dqkv, const float* dout, const void* saved, const void* qkv, const void* out,
                              int64_t B, int64_t T, int64_t C, int64_t NH, bool bf16_io = false, bool dqkv_bf16 = false,
                              int64_t NKV = 0);

}  // namespace shardtrain::cuda
