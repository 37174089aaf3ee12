#include "kernels/cuda/activation.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// e^x for x <= 0: the CPU's detail::exp_nonpos (kernels/cpu/vec_math.h)
// written for the device, step by step, each operation rounded on its own
// (no FMA contraction), so both give the same bits.
__device__ float exp_nonpos(float x) {
  const float t = __fadd_rn(__fmul_rn(x, 1.44269504f), 12582912.0f);
  const float n = __fsub_rn(t, 12582912.0f);
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, 0.693359375f)), __fmul_rn(n, -2.12194440e-4f));
  float p = 1.0f / 5040;
  p = __fadd_rn(1.0f / 720, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 120, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 24, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 6, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 2, __fmul_rn(r, p));
  p = __fadd_rn(1.0f, __fmul_rn(r, p));
  p = __fadd_rn(1.0f, __fmul_rn(r, p));
  const uint32_t n_bits = __float_as_uint(t) - 0x4B400000u;
  const float y = __fmul_rn(p, __uint_as_float((n_bits + 127u) << 23));
  return x < -87.3f ? 0.0f : y;
}

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
    const float du = __fmul_rn(
        kSqrt2OverPi, __fadd_rn(1.0f, __fmul_rn(__fmul_rn(__fmul_rn(3.0f, kCubic), x), x)));
    const float slope = __fadd_rn(s, __fmul_rn(__fmul_rn(__fmul_rn(0.5f, x), sech2), du));
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
