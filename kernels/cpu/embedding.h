// Embedding lookup: out[N, C] = table[ids[n], :]. An id outside [0, V) is an
// Error naming the position and the id.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V,
                       int64_t C);

// dtable[V, C] += scatter of dout rows by ids (overwritten first unless
// accumulate). Rows are added in order n = 0..N-1, so the result is deterministic.
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                        int64_t C, bool accumulate);

}  // namespace shardtrain::cpu
