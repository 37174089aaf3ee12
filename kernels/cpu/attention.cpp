#include "kernels/cpu/attention.h"

#include "kernels/cpu/gemm.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cmath>

namespace shardtrain::cpu {
namespace {

void check_heads(int64_t C, int64_t NH) {
  ST_CHECK(NH > 0 && C % NH == 0, "attention: {} channels do not split into {} heads", C, NH);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  check_heads(C, NH);
  const int64_t hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    for (int64_t h = 0; h < NH; ++h) {
      const float* q = x + h * hs;
      const float* k = x + C + h * hs;
      const float* v = x + 2 * C + h * hs;
      float* p = att + (b * NH + h) * T * T;
      // Scores S = scale * Q K^T, all T x T (the masked half is overwritten below).
      gemm(false, true, T, T, hs, scale, q, C3, k, C3, 0.0f, p, T);
      for (int64_t t = 0; t < T; ++t) {
        float* row = p + t * T;
        float maxv = row[0];
        for (int64_t j = 1; j <= t; ++j) maxv = std::max(maxv, row[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j <= t; ++j) {
          row[j] = std::exp(row[j] - maxv);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
        std::fill(row + t + 1, row + T, 0.0f);  // causal mask
      }
      // O = P V: the zeros above the diagonal keep it causal.
      gemm(false, false, T, hs, T, 1.0f, p, T, v, C3, 0.0f, out + b * T * C + h * hs, C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int64_t B,
                        int64_t T, int64_t C, int64_t NH) {
  check_heads(C, NH);
  const int64_t hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    float* dx = dqkv + b * T * C3;
    const float* dO = dout + b * T * C;
    for (int64_t h = 0; h < NH; ++h) {
      const float* q = x + h * hs;
      const float* k = x + C + h * hs;
      const float* v = x + 2 * C + h * hs;
      const float* p = att + (b * NH + h) * T * T;
      float* dp = scratch;
      // dP = dO V^T;  dV = P^T dO (overwrites).
      gemm(false, true, T, T, hs, 1.0f, dO + h * hs, C, v, C3, 0.0f, dp, T);
      gemm(true, false, T, hs, T, 1.0f, p, T, dO + h * hs, C, 0.0f, dx + 2 * C + h * hs, C3);
      // Softmax backward, row by row: dS = P * (dP - sum_j P dP); 0 where masked.
      for (int64_t t = 0; t < T; ++t) {
        const float* prow = p + t * T;
        float* drow = dp + t * T;
        float dot = 0.0f;
        for (int64_t j = 0; j <= t; ++j) dot += prow[j] * drow[j];
        for (int64_t j = 0; j <= t; ++j) drow[j] = prow[j] * (drow[j] - dot);
        std::fill(drow + t + 1, drow + T, 0.0f);
      }
      // S = scale Q K^T:  dQ = scale dS K;  dK = scale dS^T Q.
      gemm(false, false, T, hs, T, scale, dp, T, k, C3, 0.0f, dx + h * hs, C3);
      gemm(true, false, T, hs, T, scale, dp, T, q, C3, 0.0f, dx + C + h * hs, C3);
    }
  }
}

}  // namespace shardtrain::cpu
