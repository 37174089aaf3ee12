#include "kernels/cpu/linear.h"

#include "kernels/cpu/gemm.h"

#include <algorithm>

namespace shardtrain::cpu {

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC) {
  // Bias fused: out starts as the bias rows and the GEMM adds in*W^T on top
  // (beta = 1), so out is written once instead of once more for the bias.
  if (bias != nullptr)
    for (int64_t n = 0; n < N; ++n) std::copy(bias, bias + OC, out + n * OC);
  // W is [OC, IC] (PyTorch layout), so in[N,IC] * W^T is the "NT" GEMM.
  gemm(false, true, N, OC, IC, 1.0f, in, IC, weight, IC, bias != nullptr ? 1.0f : 0.0f, out, OC);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  // din[N,IC] = dout[N,OC] * W[OC,IC]; beta = 0 overwrites without a zeroing pass.
  if (din != nullptr) gemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, din, IC);
  // dW[OC,IC] (+)= dout^T * in: beta chooses overwrite (0) or accumulate (1).
  gemm(true, false, OC, IC, N, 1.0f, dout, OC, in, IC, accumulate ? 1.0f : 0.0f, dweight, IC);
  if (dbias == nullptr) return;
  // db = column sums of dout, one vectorized row add per sample, rows in
  // order (deterministic). Without accumulate the first row is copied in
  // rather than added to zeros.
  int64_t n = 0;
  if (!accumulate) {
    if (N == 0) {
      std::fill(dbias, dbias + OC, 0.0f);
      return;
    }
    std::copy(dout, dout + OC, dbias);
    n = 1;
  }
  for (; n < N; ++n) {
    const float* row = dout + n * OC;
    for (int64_t o = 0; o < OC; ++o) dbias[o] += row[o];
  }
}

}  // namespace shardtrain::cpu
