// Causal self-attention with grouped-query heads on the GPU, tiled with an
// online softmax (FlashAttention-2) so that nothing of size T x T is kept on
// the device: the contract of cpu::flash_attention_forward / _backward
// (kernels/cpu/flash_attention.h) on device pointers, work on
// compute_stream(). It is the GPU's attention where cuDNN's fused kernel
// (fused_attention.h) does not run: f32 or tf32 GEMMs, shapes or cuDNN
// versions it refuses.
//
// Layouts, as the CPU's:
//   qkv [B, T, (H + 2 KV) hs]: q heads in columns [0, H hs), k heads in
//     [H hs, (H + KV) hs), v heads in [(H + KV) hs, (H + 2 KV) hs); query
//     head h reads key/value head h / (H / KV).
//   out [B, T, H hs];  lse [B, H, T] (f32): each row's log-sum-exp of the
//     scaled scores, all the backward needs besides qkv and out.
// The arithmetic is f32 on CUDA cores (no tensor cores: the f32 contract,
// and a kernel meant to be simple and correct rather than fast). bf16 tensors
// (mixed precision's activations) are widened exactly on load, and a bf16
// output is the f32 result rounded once.
//
// Every sum runs in a fixed order and nothing is accumulated with atomics:
// the same inputs give the same bits on every call (activation checkpointing
// recomputes the forward and relies on it). Head sizes up to 128 (an Error
// above); any T.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// out and lse are overwritten.
void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                             int64_t hs);
void flash_attention_forward(void* out, bool out_bf16, float* lse, const void* qkv, bool qkv_bf16, int64_t B, int64_t T,
                             int64_t H, int64_t KV, int64_t hs);

// Floats of device workspace flash_attention_backward needs: one per query
// row and head (rowsum(dO * O)), B*H*T; it grows as T, not T^2.
int64_t flash_attention_scratch_floats(int64_t T, int64_t hs, int64_t B, int64_t H);

// dqkv [B, T, (H + 2 KV) hs] is overwritten (k and v gradients summed over
// the query heads of their group). qkv, out and lse: the forward's, unchanged
// since. dout [B, T, H hs]. scratch: flash_attention_scratch_floats(T, hs, B,
// H) floats of device memory, contents irrelevant. dqkv overlaps nothing.
void flash_attention_backward(void* dqkv, bool dqkv_bf16, float* scratch, const float* dout, const void* qkv,
                              bool qkv_bf16, const void* out, bool out_bf16, const float* lse, int64_t B, int64_t T,
                              int64_t H, int64_t KV, int64_t hs);

}  // namespace shardtrain::cuda
