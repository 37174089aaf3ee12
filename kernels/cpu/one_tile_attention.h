// Causal self-attention for sequences no longer than one of
// flash_attention's tiles (T <= 64), with flash_attention's contract
// (flash_attention.h: layouts, grouped-query heads, lse, dqkv overwritten).
//
// There each query head has a single tile of scores, and the tiled kernel
// makes two small products per head forward and five backward, each a
// 64 x 64 x hs call. Here the heads of several sequences are copied into
// dense [head, T, hs] blocks and each product is one gemm_batched() over all
// of them, which oneDNN runs on its brgemm kernels; the softmax then runs
// over whole rows of T, masked by select rather than by shorter loops. The
// scores of a chunk of sequences are materialized (G * T * T floats per key
// head, as many as the tiled kernel's tiles), never kept past the call.
//
// Workspace: a per-thread buffer sized for one chunk of sequences
// (one_tile_attention_chunk), kept between calls.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// Whether T fits one tile (and this kernel applies).
bool one_tile_attention_fits(int64_t T);

// How many of the B sequences go through the products together: as many as
// keep the backward's working set near 1 MiB (it stays in the core's L2),
// at least 1.
int64_t one_tile_attention_chunk(int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs);

// qkv, out and dqkv hold f32 values, or bf16 ones (mixed precision's
// activations) where their flag says; lse and dout are f32. Where the
// products take bf16 operands (gemm.h's bf16_operand_products()), q, k, v,
// the probabilities, dO and dS are rounded into bf16 blocks once, and the
// products run on them (gemm_bf16_batched): the same roundings, and the
// same bits, as gemm_batched() on f32 blocks, without a rounding per call
// or an f32 copy of bf16 tensors.
void one_tile_attention_forward(void* out, bool out_bf16, float* lse, const void* qkv, bool qkv_bf16, int64_t B,
                                int64_t T, int64_t H, int64_t KV, int64_t hs);
void one_tile_attention_backward(void* dqkv, bool dqkv_bf16, const float* dout, const void* qkv, bool qkv_bf16,
                                 const void* out, bool out_bf16, const float* lse, int64_t B, int64_t T, int64_t H,
                                 int64_t KV, int64_t hs);

}  // namespace shardtrain::cpu
