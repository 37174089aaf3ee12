#include "kernels/cuda/rmsnorm.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;       // row kernels: one block per row
constexpr int kColumnThreads = 64;  // dweight: one thread per column of a block
constexpr int64_t kMaxRowBlocks = 65535;

// One block per row: the mean of squares, then the output. With kResidual the
// row is first made: sum_out's row = a + b (add_kernel's one rounding), its
// squares summed in the same pass, and the output pass reads it back. Each
// thread reads back only the elements it wrote itself (the same i stride), so
// no barrier is needed beyond block_sum's. Out: float, or uint16_t for bf16.
template <bool kResidual, typename Out>
__global__ void rmsnorm_forward_kernel(Out* out, float* rstd, const float* in, float* sum_out, const float* a,
                                       const float* b, const float* weight, int64_t N, int64_t C, float eps) {
  __shared__ float sh[kThreads];
  const float inv_c = 1.0f / float(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* x = kResidual ? sum_out + row * C : in + row * C;
    Out* o = out + row * C;
    float acc = 0.0f;
    if constexpr (kResidual) {
      // sum may be a or b itself: each element is read before it is written.
      const float* ra = a + row * C;
      const float* rb = b + row * C;
      float* sum = sum_out + row * C;
      for (int64_t i = threadIdx.x; i < C; i += kThreads) {
        const float v = __fadd_rn(ra[i], rb[i]);
        sum[i] = v;
        acc = __fadd_rn(acc, __fmul_rn(v, v));
      }
    } else {
      for (int64_t i = threadIdx.x; i < C; i += kThreads) acc = __fadd_rn(acc, __fmul_rn(x[i], x[i]));
    }
    const float ms = __fmul_rn(block_sum<kThreads>(acc, sh), inv_c);
    const float s = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, eps)));
    // (x * s) * w, each product rounded as on the CPU.
    for (int64_t i = threadIdx.x; i < C; i += kThreads) store_f32(o, i, __fmul_rn(__fmul_rn(x[i], s), weight[i]));
    if (threadIdx.x == 0) rstd[row] = s;
  }
}

// din = s * (w * dy - norm * mean(w * dy * norm)), norm = x * s; with
// kResidual, + dresidual (add_kernel's order: din's value first), added as din
// is stored. din may be dresidual itself: each thread reads an element of it
// before writing that same element.
template <bool kResidual>
__global__ void rmsnorm_din_kernel(float* din, const float* dout, const float* in, const float* weight,
                                   const float* rstd, const float* dresidual, int64_t N, int64_t C) {
  __shared__ float sh[kThreads];
  const float inv_c = 1.0f / float(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* x = in + row * C;
    const float* g = dout + row * C;
    float* dx = din + row * C;
    const float s = rstd[row];
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += kThreads)
      acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(weight[i], g[i]), __fmul_rn(x[i], s)));
    const float dnorm_norm_mean = __fmul_rn(block_sum<kThreads>(acc, sh), inv_c);
    for (int64_t i = threadIdx.x; i < C; i += kThreads) {
      const float norm = __fmul_rn(x[i], s);
      const float d = __fmul_rn(__fsub_rn(__fmul_rn(weight[i], g[i]), __fmul_rn(norm, dnorm_norm_mean)), s);
      if constexpr (kResidual) {
        dx[i] = __fadd_rn(d, dresidual[row * C + i]);
      } else {
        dx[i] = d;
      }
    }
  }
}

// dweight in two deterministic stages, as layernorm's parameter gradients.
// Stage 1: block (column group, chunk) sums kRowsPerChunk rows of each of its
// columns, in row order, into partial[chunk, c]. Stage 2: one thread per
// column adds the chunks in order onto dweight (or 0).
constexpr int64_t kRowsPerChunk = 32;

__global__ void rmsnorm_dweight_partial_kernel(float* partial, const float* dout, const float* in, const float* rstd,
                                               int64_t N, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t first = chunk * kRowsPerChunk;
    const int64_t last = first + kRowsPerChunk < N ? first + kRowsPerChunk : N;
    float dw = 0.0f;
    for (int64_t n = first; n < last; ++n)
      dw = __fadd_rn(dw, __fmul_rn(__fmul_rn(in[n * C + c], rstd[n]), dout[n * C + c]));
    partial[chunk * C + c] = dw;
  }
}

__global__ void rmsnorm_dweight_sum_kernel(float* dweight, const float* partial, int64_t chunks, int64_t C,
                                           bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += stride) {
    float dw = accumulate ? dweight[c] : 0.0f;
    for (int64_t k = 0; k < chunks; ++k) dw = __fadd_rn(dw, partial[k * C + c]);
    dweight[c] = dw;
  }
}

unsigned row_blocks(int64_t N) { return unsigned(N < kMaxRowBlocks ? N : kMaxRowBlocks); }

// Both stages; with N == 0 it still zeroes dweight when !accumulate, as the
// CPU does.
void launch_dweight(float* dweight, const float* dout, const float* in, const float* rstd, int64_t N, int64_t C,
                    bool accumulate) {
  const int64_t chunks = N > 0 ? (N + kRowsPerChunk - 1) / kRowsPerChunk : 0;
  auto* partial = static_cast<float*>(scratch(ScratchSlot::reduce, size_t(chunks * C + 1) * sizeof(float)));
  if (chunks > 0) {
    // Chunks beyond the grid's 65535 rows of blocks loop inside the kernel.
    const dim3 grid(unsigned((C + kColumnThreads - 1) / kColumnThreads), unsigned(chunks < 65535 ? chunks : 65535));
    rmsnorm_dweight_partial_kernel<<<grid, kColumnThreads, 0, compute_stream()>>>(partial, dout, in, rstd, N, C);
    ST_CUDA_CHECK_LAUNCH("rmsnorm_dweight_partial_kernel");
  }
  rmsnorm_dweight_sum_kernel<<<grid_for(C, kColumnThreads), kColumnThreads, 0, compute_stream()>>>(
      dweight, partial, chunks, C, accumulate);
  ST_CUDA_CHECK_LAUNCH("rmsnorm_dweight_sum_kernel");
}

template <bool kResidual>
void launch_forward(void* out, bool out_bf16, float* rstd, const float* in, float* sum_out, const float* a,
                    const float* b, const float* weight, int64_t N, int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  if (out_bf16) {
    rmsnorm_forward_kernel<kResidual><<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        static_cast<uint16_t*>(out), rstd, in, sum_out, a, b, weight, N, C, eps);
  } else {
    rmsnorm_forward_kernel<kResidual><<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        static_cast<float*>(out), rstd, in, sum_out, a, b, weight, N, C, eps);
  }
  ST_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t N, int64_t C, float eps) {
  rmsnorm_forward(out, false, rstd, in, weight, N, C, eps);
}

void rmsnorm_forward(void* out, bool out_bf16, float* rstd, const float* in, const float* weight, int64_t N, int64_t C,
                     float eps) {
  launch_forward<false>(out, out_bf16, rstd, in, nullptr, nullptr, nullptr, weight, N, C, eps);
}

void residual_rmsnorm_forward(float* sum_out, float* out, float* rstd, const float* a, const float* b,
                              const float* weight, int64_t N, int64_t C, float eps) {
  residual_rmsnorm_forward(sum_out, out, false, rstd, a, b, weight, N, C, eps);
}

void residual_rmsnorm_forward(float* sum_out, void* out, bool out_bf16, float* rstd, const float* a, const float* b,
                              const float* weight, int64_t N, int64_t C, float eps) {
  launch_forward<true>(out, out_bf16, rstd, nullptr, sum_out, a, b, weight, N, C, eps);
}

void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                      const float* rstd, const float* dresidual, int64_t N, int64_t C, bool accumulate) {
  if (C <= 0) return;
  if (N > 0) {
    if (dresidual != nullptr) {
      rmsnorm_din_kernel<true>
          <<<row_blocks(N), kThreads, 0, compute_stream()>>>(din, dout, in, weight, rstd, dresidual, N, C);
    } else {
      rmsnorm_din_kernel<false>
          <<<row_blocks(N), kThreads, 0, compute_stream()>>>(din, dout, in, weight, rstd, nullptr, N, C);
    }
    ST_CUDA_CHECK_LAUNCH("rmsnorm_din_kernel");
  }
  launch_dweight(dweight, dout, in, rstd, N, C, accumulate);
}

}  // namespace shardtrain::cuda
