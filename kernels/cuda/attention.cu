#include "kernels/cuda/attention.h"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm.h"

#include <cmath>
#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;  // a power of two (the tree reductions halve it)

void check_dims(const char* fn, int64_t B, int64_t T, int64_t C, int64_t NH) {
  ST_CUDA_REQUIRE(B >= 0 && T >= 0 && C > 0 && NH > 0 && C % NH == 0,
                  std::string(fn) + ": " + std::to_string(C) + " channels do not split into " +
                      std::to_string(NH) + " heads (B=" + std::to_string(B) +
                      " T=" + std::to_string(T) + ")");
}

// One block per row r of `rows` rows of length T (row r is query t = r % T):
// the causal softmax in place, subtracting the row's max; 0 for j > t.
__global__ void causal_softmax_kernel(float* att, int64_t rows, int64_t T) {
  __shared__ float sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* row = att + r * T;
    const int64_t t = r % T;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j <= t; j += kThreads) m = fmaxf(m, row[j]);
    const float maxv = block_max<kThreads>(m, sh);
    float part = 0.0f;
    for (int64_t j = threadIdx.x; j <= t; j += kThreads) {
      const float e = expf(row[j] - maxv);
      row[j] = e;
      part += e;
    }
    const float inv = 1.0f / block_sum<kThreads>(part, sh);
    for (int64_t j = threadIdx.x; j < T; j += kThreads) row[j] = j <= t ? row[j] * inv : 0.0f;
  }
}

// One block per row of the score gradient (rows of length T, query t = r % T):
// dS = P * (dP - sum_{j<=t} P dP) in place over dP, 0 where masked.
__global__ void softmax_backward_kernel(float* dp, const float* p, int64_t rows, int64_t T) {
  __shared__ float sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* drow = dp + r * T;
    const float* prow = p + r * T;
    const int64_t t = r % T;
    float part = 0.0f;
    for (int64_t j = threadIdx.x; j <= t; j += kThreads) part += prow[j] * drow[j];
    const float dot = block_sum<kThreads>(part, sh);
    for (int64_t j = threadIdx.x; j < T; j += kThreads)
      drow[j] = j <= t ? prow[j] * (drow[j] - dot) : 0.0f;
  }
}

unsigned row_blocks(int64_t rows) {
  return unsigned(rows < 1 ? 1 : (rows > 65535LL * 8 ? 65535LL * 8 : rows));
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH) {
  check_dims("cuda::attention_forward", B, T, C, NH);
  if (B == 0 || T == 0) return;
  const int64_t hs = C / NH, C3 = 3 * C, TT = T * T;
  const float scale = 1.0f / std::sqrt(float(hs));  // as the CPU computes it
  // One sample at a time, its NH heads batched: head h of sample b starts
  // h*hs channels into the sample's rows (stride hs between heads), and its
  // probabilities are the h-th [T, T] block of att (stride T*T). One stride
  // cannot also step over samples (T*3C apart in qkv), hence the host loop.
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    float* p = att + b * NH * TT;
    // S = scale * Q K^T, all T x T (the masked half is overwritten by the softmax).
    gemm_strided_batched(false, true, T, T, hs, scale, x, C3, hs, x + C, C3, hs, 0.0f, p, T, TT,
                         NH);
  }
  causal_softmax_kernel<<<row_blocks(B * NH * T), kThreads, 0, compute_stream()>>>(att, B * NH * T,
                                                                                  T);
  ST_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    // O = P V (the zeros above the diagonal keep it causal), written into
    // head h's channels of out[b] (stride hs between heads).
    gemm_strided_batched(false, false, T, hs, T, 1.0f, att + b * NH * TT, T, TT, x + 2 * C, C3, hs,
                         0.0f, out + b * T * C, C, hs, NH);
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int64_t B, int64_t T, int64_t C, int64_t NH) {
  check_dims("cuda::attention_backward", B, T, C, NH);
  if (B == 0 || T == 0) return;
  const int64_t hs = C / NH, C3 = 3 * C, TT = T * T;
  const float scale = 1.0f / std::sqrt(float(hs));
  // dP / dS of one sample's NH heads. The reduce slot is not touched by gemm
  // (bf16 GEMMs use gemm_a and gemm_b), so it stays ours across the GEMMs;
  // reusing it sample after sample is ordered by the compute stream.
  float* dp = static_cast<float*>(scratch(ScratchSlot::reduce, size_t(NH * TT) * sizeof(float)));
  for (int64_t b = 0; b < B; ++b) {
    const float* x = qkv + b * T * C3;
    float* dx = dqkv + b * T * C3;
    const float* dO = dout + b * T * C;
    const float* p = att + b * NH * TT;
    // dP = dO V^T;  dV = P^T dO (overwrites head h's v channels).
    gemm_strided_batched(false, true, T, T, hs, 1.0f, dO, C, hs, x + 2 * C, C3, hs, 0.0f, dp, T,
                         TT, NH);
    gemm_strided_batched(true, false, T, hs, T, 1.0f, p, T, TT, dO, C, hs, 0.0f, dx + 2 * C, C3,
                         hs, NH);
    // Softmax backward, row by row: dS = P * (dP - sum_j P dP); 0 where masked.
    softmax_backward_kernel<<<row_blocks(NH * T), kThreads, 0, compute_stream()>>>(dp, p, NH * T,
                                                                                  T);
    ST_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
    // S = scale Q K^T:  dQ = scale dS K;  dK = scale dS^T Q. Together with dV
    // every channel of dx is written: no zeroing pass.
    gemm_strided_batched(false, false, T, hs, T, scale, dp, T, TT, x + C, C3, hs, 0.0f, dx, C3, hs,
                         NH);
    gemm_strided_batched(true, false, T, hs, T, scale, dp, T, TT, x, C3, hs, 0.0f, dx + C, C3, hs,
                         NH);
  }
}

}  // namespace shardtrain::cuda
