#include "kernels/cuda/elementwise.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;
// Blocks of the first sum_squares pass: a fixed cap, so the partials (and the
// order they are combined in) depend on n only.
constexpr unsigned kMaxReduceBlocks = 1024;

__global__ void sum_squares_partial_kernel(double* partial, const float* x, int64_t n) {
  __shared__ double sh[kThreads];
  double acc = 0.0;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const double v = double(x[i]);
    acc += v * v;
  }
  const double block = block_sum<kThreads>(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = block;
}

// One block: thread t adds partials t, t + kThreads, ... in order, then the tree.
__global__ void sum_partials_kernel(double* result, const double* partial, int64_t count) {
  __shared__ double sh[kThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) acc += partial[i];
  const double total = block_sum<kThreads>(acc, sh);
  if (threadIdx.x == 0) *result = total;
}

__global__ void double_to_float_kernel(float* out, const double* in) { *out = float(*in); }

// cpu::clip_to_norm with norm = sqrt(*sq): the same double arithmetic (IEEE
// sqrt and division on both sides) and the same float factor.
template <typename Sq>
__global__ void clip_kernel(float* x, int64_t n, const Sq* sq, double max_norm) {
  const double norm = sqrt(double(*sq));
  if (!(max_norm > 0 && norm > max_norm)) return;
  const float s = float(max_norm / (norm + 1e-6));
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= s;
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= s;
}

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* y, const float* x, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) y[i] += x[i];
}

__global__ void f32_to_bf16_kernel(uint16_t* out, const float* in, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = f32_to_bf16_bits(in[i]);
}

__global__ void bf16_to_f32_kernel(float* out, const uint16_t* in, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = bf16_bits_to_f32(in[i]);
}

__global__ void u8_normalize_kernel(float* out, const uint8_t* in, int64_t n, float a, float b) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  // Multiply and add rounded separately (no FMA contraction), as the CPU does.
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __fadd_rn(__fmul_rn(float(in[i]), a), b);
}

// The sum of squares of x (n > 0) into the reduce scratch; the result's
// device address, valid until that slot's next use.
const double* sum_squares_on_device(const float* x, int64_t n) {
  unsigned blocks = grid_for(n, kThreads);
  if (blocks > kMaxReduceBlocks) blocks = kMaxReduceBlocks;
  // partials[blocks] followed by the result.
  auto* partial = static_cast<double*>(scratch(ScratchSlot::reduce, (blocks + 1) * sizeof(double)));
  double* result = partial + blocks;
  cudaStream_t stream = compute_stream();
  sum_squares_partial_kernel<<<blocks, kThreads, 0, stream>>>(partial, x, n);
  ST_CUDA_CHECK_LAUNCH("sum_squares_partial_kernel");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(result, partial, int64_t(blocks));
  ST_CUDA_CHECK_LAUNCH("sum_partials_kernel");
  return result;
}

}  // namespace

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const double* result = sum_squares_on_device(x, n);
  double host = 0.0;
  ST_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, compute_stream()));
  sync_compute();  // and raises an error a kernel found
  return host;
}

void sum_squares_into(float* sq, const float* x, int64_t n) {
  cudaStream_t stream = compute_stream();
  if (n <= 0) {
    ST_CUDA_CHECK(cudaMemsetAsync(sq, 0, sizeof(float), stream));
    return;
  }
  const double* sum = sum_squares_on_device(x, n);
  double_to_float_kernel<<<1, 1, 0, stream>>>(sq, sum);
  ST_CUDA_CHECK_LAUNCH("double_to_float_kernel");
}

void clip_to_max_norm(float* x, int64_t n, double max_norm) {
  if (n <= 0 || !(max_norm > 0)) return;
  const double* sq = sum_squares_on_device(x, n);
  clip_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(x, n, sq, max_norm);
  ST_CUDA_CHECK_LAUNCH("clip_kernel");
}

void clip_to_squared_norm(float* x, int64_t n, const float* sq, double max_norm) {
  if (n <= 0 || !(max_norm > 0)) return;
  clip_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(x, n, sq, max_norm);
  ST_CUDA_CHECK_LAUNCH("clip_kernel");
}

void scale_inplace(float* x, int64_t n, float s) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(x, n, s);
  ST_CUDA_CHECK_LAUNCH("scale_kernel");
}

void add(float* out, const float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(out, a, b, n);
  ST_CUDA_CHECK_LAUNCH("add_kernel");
}

void accumulate(float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  accumulate_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(y, x, n);
  ST_CUDA_CHECK_LAUNCH("accumulate_kernel");
}

void f32_to_bf16(bf16* out, const float* in, int64_t n) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(reinterpret_cast<uint16_t*>(out), in, n);
  ST_CUDA_CHECK_LAUNCH("f32_to_bf16_kernel");
}

void bf16_to_f32(float* out, const bf16* in, int64_t n) {
  if (n <= 0) return;
  bf16_to_f32_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(
      out, reinterpret_cast<const uint16_t*>(in), n);
  ST_CUDA_CHECK_LAUNCH("bf16_to_f32_kernel");
}

void u8_to_f32_normalized(float* out, const uint8_t* in, int64_t n, float mean, float std) {
  if (n <= 0) return;
  // The same two f32 constants as kernels/cpu/elementwise.cpp, computed on the host.
  const float a = 1.0f / (255.0f * std);
  const float b = -mean / std;
  u8_normalize_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(out, in, n, a, b);
  ST_CUDA_CHECK_LAUNCH("u8_normalize_kernel");
}

}  // namespace shardtrain::cuda
