// Embedding lookup: out[N, C] = table[ids[n], :]. An id outside [0, V) is an
// Error naming the position and the id.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// An Error naming the first id outside [0, V) and its position. The kernels
// below check all ids before they write anything, so a bad id leaves the
// outputs (accumulated gradients in particular) untouched.
void check_embedding_ids(const int32_t* ids, int64_t N, int64_t V);

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C);

// dtable[V, C] += scatter of dout rows by ids (overwritten first unless
// accumulate). Rows are added in order n = 0..N-1, so the result is deterministic.
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C,
                        bool accumulate);

// Learned position embedding added to a batch of sequences: out[B, T, C] +=
// table[t, :] for position t (table has at least T rows).
void position_embedding_add(float* out, const float* table, int64_t B, int64_t T, int64_t C);

// dtable[T, C] = sum over b of dout[b, t, :] (added to when accumulate), in
// order b = 0..B-1 (deterministic). Rows of the table beyond T are left alone
// unless !accumulate, when the whole table of `rows` rows is zeroed first.
void position_embedding_backward(float* dtable, const float* dout, int64_t B, int64_t T, int64_t C, int64_t rows,
                                 bool accumulate);

}  // namespace shardtrain::cpu
