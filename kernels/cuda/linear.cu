#include "kernels/cuda/linear.h"

#include "kernels/cuda/column_sum.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"

#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;

// out[n, o] = bias[o] for every row n (the GEMM then adds in*W^T on top).
__global__ void fill_bias_rows_kernel(float* out, const float* bias, int64_t N, int64_t OC) {
  const int64_t total = N * OC;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = bias[i % OC];
}

void check_sizes(const char* fn, int64_t N, int64_t IC, int64_t OC) {
  ST_CUDA_REQUIRE(N >= 0 && IC >= 0 && OC >= 0, std::string(fn) + ": negative size N=" + std::to_string(N) +
                                                    " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC));
}

}  // namespace

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC) {
  check_sizes("cuda::linear_forward", N, IC, OC);
  if (N == 0 || OC == 0) return;
  // W is [OC, IC], so in[N,IC] * W^T is the "NT" GEMM; cuBLASLt adds the
  // bias in its epilogue, as the GEMM writes each tile.
  if (linear_backend() == LinearBackend::cublaslt &&
      gemm_lt(false, true, N, OC, IC, in, IC, weight, IC, 0.0f, out, OC,
              bias != nullptr ? LtEpilogue::bias : LtEpilogue::none, const_cast<float*>(bias)))
    return;
  // Bias fused as on the CPU: out starts as the bias rows, the GEMM adds on top.
  if (bias != nullptr) {
    fill_bias_rows_kernel<<<grid_for(N * OC, kThreads), kThreads, 0, compute_stream()>>>(out, bias, N, OC);
    ST_CUDA_CHECK_LAUNCH("fill_bias_rows_kernel");
  }
  // W is [OC, IC], so in[N,IC] * W^T is the "NT" GEMM.
  gemm(false, true, N, OC, IC, 1.0f, in, IC, weight, IC, bias != nullptr ? 1.0f : 0.0f, out, OC);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  check_sizes("cuda::linear_backward", N, IC, OC);
  // din[N,IC] = dout[N,OC] * W[OC,IC] (beta 0 overwrites).
  if (din != nullptr) gemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, din, IC);
  // dW[OC,IC] = dout^T * in with dbias = dout's column sums in the same
  // GEMM's epilogue. The epilogue overwrites, so accumulation (and the
  // cases cuBLASLt has no algorithm for) take the separate column sums.
  if (dbias != nullptr && !accumulate && linear_backend() == LinearBackend::cublaslt &&
      gemm_lt(true, false, OC, IC, N, dout, OC, in, IC, 0.0f, dweight, IC, LtEpilogue::bias_grad_a, dbias))
    return;
  // dW[OC,IC] (+)= dout^T * in; with N == 0 the GEMM's empty sum zeroes dW
  // (or leaves it when accumulating).
  gemm(true, false, OC, IC, N, 1.0f, dout, OC, in, IC, accumulate ? 1.0f : 0.0f, dweight, IC);
  if (dbias != nullptr) column_sums(dbias, dout, N, OC, accumulate);
}

}  // namespace shardtrain::cuda
