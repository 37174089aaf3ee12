#include "kernels/cuda/swiglu.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/context.h"
#include "kernels/cuda/exp_nonpos.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;

// sigmoid(g), and sigmoid(-g) = 1 - sigmoid(g) without cancellation:
// e = e^{-|g|} <= 1, 1/(1 + e) the larger of the two, e/(1 + e) the smaller.
// As swiglu_sigmoid in kernels/cpu/swiglu.cpp.
__device__ float swiglu_sigmoid(float g, float* sigmoid_neg) {
  const float e = exp_nonpos(-fabsf(g));
  const float inv = __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
  const bool pos = g >= 0.0f;
  *sigmoid_neg = __fmul_rn(pos ? e : 1.0f, inv);
  return __fmul_rn(pos ? 1.0f : e, inv);
}

// Element (n, i) of h for each k = n*F + i in a grid-stride loop.
template <typename H, typename GU>
__global__ void swiglu_forward_kernel(H* h, const GU* gu, int64_t N, int64_t F) {
  const int64_t n_all = N * F;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n_all; k += stride) {
    const int64_t n = k / F, i = k - n * F;
    const float g = load_f32(gu, n * 2 * F + i), u = load_f32(gu, n * 2 * F + F + i);
    float sig_neg;
    const float sig = swiglu_sigmoid(g, &sig_neg);
    store_f32(h, k, __fmul_rn(__fmul_rn(g, sig), u));
  }
}

// dgate = (dh * u) * silu'(g), silu'(g) = sigmoid(g) * (1 + g * sigmoid(-g));
// dup = dh * silu(g). As the CPU, in the same order.
template <typename DGU, typename DH, typename GU>
__global__ void swiglu_backward_kernel(DGU* dgu, const DH* dh, const GU* gu, int64_t N, int64_t F) {
  const int64_t n_all = N * F;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n_all; k += stride) {
    const int64_t n = k / F, i = k - n * F;
    const int64_t gi = n * 2 * F + i, ui = gi + F;
    const float g = load_f32(gu, gi), u = load_f32(gu, ui), d = load_f32(dh, k);
    float sig_neg;
    const float sig = swiglu_sigmoid(g, &sig_neg);
    const float silu = __fmul_rn(g, sig);
    const float dsilu = __fmul_rn(sig, __fadd_rn(1.0f, __fmul_rn(g, sig_neg)));
    store_f32(dgu, gi, __fmul_rn(__fmul_rn(d, u), dsilu));
    store_f32(dgu, ui, __fmul_rn(d, silu));
  }
}

template <typename H, typename GU>
void launch_forward(void* h, const void* gu, int64_t N, int64_t F) {
  swiglu_forward_kernel<<<grid_for(N * F, kThreads), kThreads, 0, compute_stream()>>>(static_cast<H*>(h),
                                                                                      static_cast<const GU*>(gu), N, F);
  ST_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

template <typename DGU, typename DH, typename GU>
void launch_backward(void* dgu, const void* dh, const void* gu, int64_t N, int64_t F) {
  swiglu_backward_kernel<<<grid_for(N * F, kThreads), kThreads, 0, compute_stream()>>>(
      static_cast<DGU*>(dgu), static_cast<const DH*>(dh), static_cast<const GU*>(gu), N, F);
  ST_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

// The backward's last two element types, once the first is fixed.
template <typename DGU>
void launch_backward_for(void* dgu, const void* dh, bool dh_bf16, const void* gu, bool gu_bf16, int64_t N, int64_t F) {
  if (dh_bf16) {
    if (gu_bf16) {
      launch_backward<DGU, uint16_t, uint16_t>(dgu, dh, gu, N, F);
    } else {
      launch_backward<DGU, uint16_t, float>(dgu, dh, gu, N, F);
    }
  } else if (gu_bf16) {
    launch_backward<DGU, float, uint16_t>(dgu, dh, gu, N, F);
  } else {
    launch_backward<DGU, float, float>(dgu, dh, gu, N, F);
  }
}

}  // namespace

void swiglu_forward(float* h, const float* gu, int64_t N, int64_t F) { swiglu_forward(h, false, gu, false, N, F); }

void swiglu_forward(void* h, bool h_bf16, const void* gu, bool gu_bf16, int64_t N, int64_t F) {
  if (N <= 0 || F <= 0) return;
  if (h_bf16) {
    if (gu_bf16) {
      launch_forward<uint16_t, uint16_t>(h, gu, N, F);
    } else {
      launch_forward<uint16_t, float>(h, gu, N, F);
    }
  } else if (gu_bf16) {
    launch_forward<float, uint16_t>(h, gu, N, F);
  } else {
    launch_forward<float, float>(h, gu, N, F);
  }
}

void swiglu_backward(float* dgu, const float* dh, const float* gu, int64_t N, int64_t F) {
  swiglu_backward(dgu, false, dh, false, gu, false, N, F);
}

void swiglu_backward(void* dgu, bool dgu_bf16, const void* dh, bool dh_bf16, const void* gu, bool gu_bf16, int64_t N,
                     int64_t F) {
  if (N <= 0 || F <= 0) return;
  if (dgu_bf16) {
    launch_backward_for<uint16_t>(dgu, dh, dh_bf16, gu, gu_bf16, N, F);
  } else {
    launch_backward_for<float>(dgu, dh, dh_bf16, gu, gu_bf16, N, F);
  }
}

}  // namespace shardtrain::cuda
