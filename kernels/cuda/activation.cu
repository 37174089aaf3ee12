#include "kernels/cuda/activation.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/exp_nonpos.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// (1 + tanh u) / 2 = sigmoid(2u) without overflow or cancellation; also
// sech^2(u). As detail::sigmoid_2u.
__device__ float sigmoid_2u(float u, float* sech2) {
  const float e = exp_nonpos(__fmul_rn(-2.0f, fabsf(u)));
  const float inv = __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
  *sech2 = __fmul_rn(__fmul_rn(__fmul_rn(4.0f, e), inv), inv);
  return __fmul_rn(u >= 0.0f ? 1.0f : e, inv);
}

// sqrt(2/pi) (x + 0.044715 x^3), evaluated left to right as on the CPU.
__device__ float gelu_u(float x) {
  const float cube = __fmul_rn(__fmul_rn(__fmul_rn(kCubic, x), x), x);
  return __fmul_rn(kSqrt2OverPi, __fadd_rn(x, cube));
}

__global__ void relu_forward_kernel(float* out, const float* in, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = in[i];
    out[i] = x > 0.0f ? x : 0.0f;
  }
}

__global__ void relu_backward_kernel(float* din, const float* dout, const float* out, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = dout[i];
    din[i] = out[i] > 0.0f ? g : 0.0f;
  }
}

__global__ void gelu_forward_kernel(float* out, const float* in, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = in[i];
    float sech2;
    out[i] = __fmul_rn(x, sigmoid_2u(gelu_u(x), &sech2));  // x (1 + tanh u) / 2
  }
}

__global__ void gelu_backward_kernel(float* din, const float* dout, const float* in, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = in[i];
    float sech2;
    const float s = sigmoid_2u(gelu_u(x), &sech2);
    // d/dx [x (1 + tanh u)/2] = (1 + tanh u)/2 + x/2 sech^2(u) du/dx, with
    // du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2); same association as the CPU.
    const float du = __fmul_rn(kSqrt2OverPi, __fadd_rn(1.0f, __fmul_rn(__fmul_rn(__fmul_rn(3.0f, kCubic), x), x)));
    // Past |x| ~ 5e19 du is infinite where sech^2 is 0: the term is 0, not NaN (as on the CPU).
    const float term = sech2 > 0.0f ? __fmul_rn(__fmul_rn(__fmul_rn(0.5f, x), sech2), du) : 0.0f;
    const float slope = __fadd_rn(s, term);
    din[i] = __fmul_rn(slope, dout[i]);
  }
}

}  // namespace

void relu_forward(float* out, const float* in, int64_t n) {
  if (n <= 0) return;
  relu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(out, in, n);
  ST_CUDA_CHECK_LAUNCH("relu_forward_kernel");
}

void relu_backward(float* din, const float* dout, const float* out, int64_t n) {
  if (n <= 0) return;
  relu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(din, dout, out, n);
  ST_CUDA_CHECK_LAUNCH("relu_backward_kernel");
}

void gelu_forward(float* out, const float* in, int64_t n) {
  if (n <= 0) return;
  gelu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(out, in, n);
  ST_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

void gelu_backward(float* din, const float* dout, const float* in, int64_t n) {
  if (n <= 0) return;
  gelu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(din, dout, in, n);
  ST_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

}  // namespace shardtrain::cuda
