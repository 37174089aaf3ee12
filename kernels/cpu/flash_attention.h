// Causal self-attention computed tile by tile with an online softmax
// (FlashAttention-2), so that nothing of size T x T is ever stored: the
// materialized kernel (attention.h) keeps its probabilities, B*H*T*T floats,
// for the backward, and at long sequences they outweigh the rest of a
// layer's activations. Here the forward keeps one log-sum-exp per row and
// the backward recomputes each tile of scores from qkv.
//
// Grouped-query attention: H query heads share KV key/value heads, H / KV
// query heads to a group (KV == H is ordinary multi-head attention, KV == 1
// multi-query attention).
//
// The score and weighted-sum products are cpu::gemm calls on tiles of 64
// query rows by 64 key columns (flash_attention.cpp says why that size); the
// softmax runs on a tile at a time, and tiles entirely above the diagonal are
// never computed. A sequence of at most one tile (T <= 64) goes to
// one_tile_attention.h instead, which batches every head's products. Single-threaded, and the same inputs give the same
// bits on every call (activation checkpointing recomputes the forward and relies on it).
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// Causal self-attention with H query heads and KV key/value heads (H % KV == 0;
// query head h reads kv head h / (H / KV)), head size hs, on rows of
//   qkv [B, T, (H + 2*KV) * hs]: q heads in columns [0, H*hs), k heads in
//   [H*hs, (H+KV)*hs), v heads in [(H+KV)*hs, (H+2*KV)*hs); head j's columns
//   are [j*hs, (j+1)*hs) of its part.
// out [B, T, H*hs]: out[b,t,h] = sum_{j<=t} softmax_j(q_t.k_j / sqrt(hs)) v_j.
// lse [B, H, T] (f32): each row's log-sum-exp of the scaled scores, all the
// backward needs besides qkv and out. Nothing of size T x T is kept.
// out and lse are overwritten. The forward's workspace (one tile of scores,
// one tile of output rows and two floats per row, a few tens of KiB) is
// allocated inside the call: it does not grow with T.
void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                             int64_t hs);

// Floats of workspace flash_attention_backward needs (tiles and row sums;
// grows as T, not T^2).
int64_t flash_attention_scratch_floats(int64_t T, int64_t hs);

// dqkv [B, T, (H+2KV)*hs] is overwritten (k and v gradients summed over the
// query heads of their group). qkv, out and lse: the forward's, unchanged
// since. dout [B, T, H*hs]. scratch: flash_attention_scratch_floats(T, hs)
// floats, contents irrelevant.
void flash_attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                              const float* lse, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs);

}  // namespace shardtrain::cpu
