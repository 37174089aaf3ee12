#include "kernels/cuda/rope.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;

// cos and sin of t * theta^(-2i/hs), [T, half] each: the CPU's table
// (kernels/cpu/rope.cpp), each double operation spelled out so that nothing
// is contracted or reassociated.
__global__ void rope_table_kernel(float* cos_t, float* sin_t, int64_t T, int64_t half, int64_t hs, float theta) {
  const int64_t n = T * half;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const int64_t t = k / half, i = k - t * half;
    const double inv_freq = pow(double(theta), __ddiv_rn(__dmul_rn(-2.0, double(i)), double(hs)));
    const double angle = __dmul_rn(double(t), inv_freq);
    double s, c;
    sincos(angle, &s, &c);
    cos_t[k] = float(c);
    sin_t[k] = float(s);
  }
}

// One thread per pair (row, head, i), i fastest: neighbouring threads touch
// neighbouring elements of both halves. kInverse rotates by -angle (the
// backward). Elem: float, or uint16_t for bf16 (widened, rounded once).
template <bool kInverse, typename Elem>
__global__ void rope_rotate_kernel(Elem* x, const float* cos_t, const float* sin_t, int64_t rows, int64_t T,
                                   int64_t row, int64_t n_heads, int64_t half) {
  const int64_t n = rows * n_heads * half;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const int64_t q = p / half, i = p - q * half;
    const int64_t r = q / n_heads, h = q - r * n_heads;
    const int64_t k = (r % T) * half + i;
    const float c = cos_t[k], s = sin_t[k];
    const int64_t lo = r * row + h * 2 * half + i, hi = lo + half;
    const float a = load_f32(x, lo), b = load_f32(x, hi);
    if constexpr (kInverse) {
      store_f32(x, lo, __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
      store_f32(x, hi, __fsub_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    } else {
      store_f32(x, lo, __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
      store_f32(x, hi, __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
  }
}

template <bool kInverse>
void rope_launch(void* x, bool x_bf16, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  ST_CUDA_REQUIRE(B >= 0 && T > 0 && n_heads >= 0 && hs > 0 && hs % 2 == 0 && n_heads * hs <= row && theta > 0.0f,
                  "rope: B=" + std::to_string(B) + " T=" + std::to_string(T) + " n_heads=" + std::to_string(n_heads) +
                      " hs=" + std::to_string(hs) + " row=" + std::to_string(row) +
                      " (T and hs positive, hs even, the heads within the row, theta positive)");
  const int64_t rows = B * T, half = hs / 2;
  if (rows == 0 || n_heads == 0) return;
  auto* table = static_cast<float*>(scratch(ScratchSlot::reduce, size_t(2 * T * half) * sizeof(float)));
  rope_table_kernel<<<grid_for(T * half, kThreads), kThreads, 0, compute_stream()>>>(table, table + T * half, T, half,
                                                                                     hs, theta);
  ST_CUDA_CHECK_LAUNCH("rope_table_kernel");
  const int64_t pairs = rows * n_heads * half;
  if (x_bf16) {
    rope_rotate_kernel<kInverse><<<grid_for(pairs, kThreads), kThreads, 0, compute_stream()>>>(
        static_cast<uint16_t*>(x), table, table + T * half, rows, T, row, n_heads, half);
  } else {
    rope_rotate_kernel<kInverse><<<grid_for(pairs, kThreads), kThreads, 0, compute_stream()>>>(
        static_cast<float*>(x), table, table + T * half, rows, T, row, n_heads, half);
  }
  ST_CUDA_CHECK_LAUNCH("rope_rotate_kernel");
}

}  // namespace

void rope_forward(float* x, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  rope_launch<false>(x, false, B, T, row, n_heads, hs, theta);
}

void rope_forward(void* x, bool x_bf16, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  rope_launch<false>(x, x_bf16, B, T, row, n_heads, hs, theta);
}

void rope_backward(float* dx, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs, float theta) {
  rope_launch<true>(dx, false, B, T, row, n_heads, hs, theta);
}

void rope_backward(void* dx, bool dx_bf16, int64_t B, int64_t T, int64_t row, int64_t n_heads, int64_t hs,
                   float theta) {
  rope_launch<true>(dx, dx_bf16, B, T, row, n_heads, hs, theta);
}

}  // namespace shardtrain::cuda
