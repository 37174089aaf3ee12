// Token and position embeddings on the GPU (device pointers, ids device int32,
// compute stream), with the semantics of kernels/cpu/embedding.h but one: an
// id outside [0, V) is found on the device and raised, naming the first bad
// position and its id as the CPU does, at a later host wait for the compute
// stream (the ones context.h names), not at the call; meanwhile its row
// reads as zeros and adds no gradient. The backward sums run in order n = 0..N-1
// (b = 0..B-1) per output element, so they are deterministic and match the
// CPU's bits.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// out[N, C] = table[ids[n], :].
void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C);

// dtable[V, C] (+)= scatter of dout rows by ids; overwritten first unless accumulate.
// The tokens are sorted by id (a stable radix sort), then each id present
// sums its rows: work in tokens x C, plus zeroing the table, not tokens x
// vocabulary (a GPT-2 vocabulary of 50k rows).
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C,
                        bool accumulate);

// out[B, T, C] += table[t, :].
void position_embedding_add(float* out, const float* table, int64_t B, int64_t T, int64_t C);

// dtable[T, C] (+)= sum over b of dout[b, t, :]; when !accumulate the whole
// table of `rows` rows is zeroed first (rows beyond T stay zero).
void position_embedding_backward(float* dtable, const float* dout, int64_t B, int64_t T, int64_t C, int64_t rows,
                                 bool accumulate);

}  // namespace shardtrain::cuda
