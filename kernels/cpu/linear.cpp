#include "kernels/cpu/linear.h"

#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <type_traits>

namespace shardtrain::cpu {

namespace {

template <typename T>
float widened(T x) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_f32(x);
  else
    return x;
}

// Without accumulate the first row is copied in rather than added to zeros.
template <typename T>
void column_sums(float* dbias, const T* dout, int64_t N, int64_t OC, bool accumulate) {
  int64_t n = 0;
  if (!accumulate) {
    if (N == 0) {
      std::fill(dbias, dbias + OC, 0.0f);
      return;
    }
    for (int64_t o = 0; o < OC; ++o) dbias[o] = widened(dout[o]);
    n = 1;
  }
  for (; n < N; ++n) {
    const T* row = dout + n * OC;
    for (int64_t o = 0; o < OC; ++o) dbias[o] += widened(row[o]);
  }
}

}  // namespace

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC) {
  // W is [OC, IC] (PyTorch layout), so in[N,IC] * W^T is the "NT" GEMM.
  if (bias != nullptr)
    gemm_bias(false, true, N, OC, IC, in, IC, weight, IC, bias, out, OC);
  else
    gemm(false, true, N, OC, IC, 1.0f, in, IC, weight, IC, 0.0f, out, OC);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  // din[N,IC] = dout[N,OC] * W[OC,IC]; beta = 0 overwrites without a zeroing pass.
  if (din != nullptr) gemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, din, IC);
  // dW[OC,IC] (+)= dout^T * in: beta chooses overwrite (0) or accumulate (1).
  gemm(true, false, OC, IC, N, 1.0f, dout, OC, in, IC, accumulate ? 1.0f : 0.0f, dweight, IC);
  if (dbias != nullptr) bias_gradient(dbias, dout, N, OC, accumulate);
}

void linear_forward_bf16(float* out, const bf16* in, const bf16* weight, const float* bias, int64_t N, int64_t IC,
                         int64_t OC) {
  if (bias != nullptr)
    gemm_bf16_bias(false, true, N, OC, IC, in, IC, weight, IC, bias, out, OC);
  else
    gemm_bf16(false, true, N, OC, IC, 1.0f, in, IC, weight, IC, 0.0f, out, OC);
}

void linear_backward_bf16(float* din, float* dweight, const bf16* dout, const bf16* in, const bf16* weight, int64_t N,
                          int64_t IC, int64_t OC, bool accumulate) {
  if (din != nullptr) gemm_bf16(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, din, IC);
  gemm_bf16(true, false, OC, IC, N, 1.0f, dout, OC, in, IC, accumulate ? 1.0f : 0.0f, dweight, IC);
}

void bias_gradient(float* dbias, const float* dout, int64_t N, int64_t OC, bool accumulate) {
  column_sums(dbias, dout, N, OC, accumulate);
}

void bias_gradient(float* dbias, const bf16* dout, int64_t N, int64_t OC, bool accumulate) {
  column_sums(dbias, dout, N, OC, accumulate);
}

}  // namespace shardtrain::cpu
