#include "kernels/cpu/embedding.h"

#include "runtime/core/error.h"

#include <algorithm>

namespace shardtrain::cpu {
void check_embedding_ids(const int32_t* ids, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    ST_CHECK(ids[n] >= 0 && ids[n] < V, "embedding: id {} at position {} is outside [0, {})", ids[n], n, V);
}

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C) {
  check_embedding_ids(ids, N, V);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = table + int64_t(ids[n]) * C;
    std::copy(row, row + C, out + n * C);
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C,
                        bool accumulate) {
  check_embedding_ids(ids, N, V);
  if (!accumulate) std::fill(dtable, dtable + V * C, 0.0f);
  // Rows are added in order n = 0..N-1: a repeated id sums its rows in a
  // fixed order, so the result is the same on every run.
  for (int64_t n = 0; n < N; ++n) {
    float* dst = dtable + int64_t(ids[n]) * C;
    const float* src = dout + n * C;
    for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
  }
}

void position_embedding_add(float* out, const float* table, int64_t B, int64_t T, int64_t C) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      float* dst = out + (b * T + t) * C;
      const float* src = table + t * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    }
}

void position_embedding_backward(float* dtable, const float* dout, int64_t B, int64_t T, int64_t C, int64_t rows,
                                 bool accumulate) {
  if (!accumulate) std::fill(dtable, dtable + rows * C, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      float* dst = dtable + t * C;
      const float* src = dout + (b * T + t) * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    }
}

}  // namespace shardtrain::cpu
