#include "kernels/cuda/layernorm.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;       // row kernels: one block per row
constexpr int kColumnThreads = 64;  // column sums: one thread per column of a block
constexpr int64_t kMaxRowBlocks = 65535;

// One block per row: mean, variance of the centered values, output. With
// kResidual the row is first made: sum_out's row = a + b (add_kernel's one
// rounding), summed in the same pass, and the later passes read it back. Each
// thread reads back only the elements it wrote itself (the same i stride),
// so no barrier is needed beyond block_sum's. Out: float, or uint16_t for a
// bf16 output (mixed precision: the normalized rows feed a bf16 GEMM).
template <bool kResidual, typename Out>
__global__ void layernorm_forward_kernel(Out* out, float* mean, float* rstd, const float* in, float* sum_out,
                                         const float* a, const float* b, const float* weight, const float* bias,
                                         int64_t N, int64_t C, float eps) {
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
        acc = __fadd_rn(acc, v);
      }
    } else {
      for (int64_t i = threadIdx.x; i < C; i += kThreads) acc = __fadd_rn(acc, x[i]);
    }
    const float m = __fmul_rn(block_sum<kThreads>(acc, sh), inv_c);
    // Variance from the centered values (E[x^2] - m^2 would cancel).
    acc = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += kThreads) {
      const float d = __fsub_rn(x[i], m);
      acc = __fadd_rn(acc, __fmul_rn(d, d));
    }
    const float var = __fmul_rn(block_sum<kThreads>(acc, sh), inv_c);
    const float s = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
    // ((x - m) * s) * w + b, each operation rounded as on the CPU.
    for (int64_t i = threadIdx.x; i < C; i += kThreads)
      store_f32(o, i, __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(x[i], m), s), weight[i]), bias[i]));
    if (threadIdx.x == 0) {
      mean[row] = m;
      rstd[row] = s;
    }
  }
}

// din = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = w * dy;
// with kResidual, + dresidual (add_kernel's order: din's value first), added
// as din is stored. din may be dresidual itself: each thread reads an element
// of it before writing that same element.
template <bool kResidual>
__global__ void layernorm_din_kernel(float* din, const float* dout, const float* in, const float* weight,
                                     const float* mean, const float* rstd, const float* dresidual, int64_t N,
                                     int64_t C) {
  __shared__ float sh[kThreads];
  const float inv_c = 1.0f / float(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* x = in + row * C;
    const float* g = dout + row * C;
    float* dx = din + row * C;
    const float m = mean[row];
    const float s = rstd[row];
    float acc_a = 0.0f, acc_b = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += kThreads) {
      const float wg = __fmul_rn(weight[i], g[i]);
      acc_a = __fadd_rn(acc_a, wg);
      acc_b = __fadd_rn(acc_b, __fmul_rn(wg, __fmul_rn(__fsub_rn(x[i], m), s)));
    }
    const float dnorm_mean = __fmul_rn(block_sum<kThreads>(acc_a, sh), inv_c);
    const float dnorm_norm_mean = __fmul_rn(block_sum<kThreads>(acc_b, sh), inv_c);
    for (int64_t i = threadIdx.x; i < C; i += kThreads) {
      const float norm = __fmul_rn(__fsub_rn(x[i], m), s);
      const float t = __fsub_rn(__fsub_rn(__fmul_rn(weight[i], g[i]), dnorm_mean), __fmul_rn(norm, dnorm_norm_mean));
      const float d = __fmul_rn(t, s);
      if constexpr (kResidual) {
        dx[i] = __fadd_rn(d, dresidual[row * C + i]);
      } else {
        dx[i] = d;
      }
    }
  }
}

// The parameter gradients in two deterministic stages. Stage 1: block
// (column group, chunk) sums kRowsPerChunk rows of each of its columns, in
// row order, into partial[chunk, c] (dweight's, then dbias's). Stage 2: one
// thread per column adds the chunks in order onto dweight/dbias (or 0). One
// thread looping over all N rows, as before, left most of the GPU idle:
// C threads, each N dependent steps.
constexpr int64_t kRowsPerChunk = 32;

__global__ void layernorm_dparams_partial_kernel(float* partial_w, float* partial_b, const float* dout, const float* in,
                                                 const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t first = chunk * kRowsPerChunk;
    const int64_t last = first + kRowsPerChunk < N ? first + kRowsPerChunk : N;
    float dw = 0.0f, db = 0.0f;
    for (int64_t n = first; n < last; ++n) {
      const float dy = dout[n * C + c];
      const float norm = __fmul_rn(__fsub_rn(in[n * C + c], mean[n]), rstd[n]);
      db = __fadd_rn(db, dy);
      dw = __fadd_rn(dw, __fmul_rn(norm, dy));
    }
    partial_w[chunk * C + c] = dw;
    partial_b[chunk * C + c] = db;
  }
}

__global__ void layernorm_dparams_sum_kernel(float* dweight, float* dbias, const float* partial_w,
                                             const float* partial_b, int64_t chunks, int64_t C, bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += stride) {
    float dw = accumulate ? dweight[c] : 0.0f;
    float db = accumulate ? dbias[c] : 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      dw = __fadd_rn(dw, partial_w[k * C + c]);
      db = __fadd_rn(db, partial_b[k * C + c]);
    }
    dweight[c] = dw;
    dbias[c] = db;
  }
}

unsigned row_blocks(int64_t N) { return unsigned(N < kMaxRowBlocks ? N : kMaxRowBlocks); }

// dweight/dbias (both stages); with N == 0 it still zeroes them when
// !accumulate, as the CPU does.
void launch_dparams(float* dweight, float* dbias, const float* dout, const float* in, const float* mean,
                    const float* rstd, int64_t N, int64_t C, bool accumulate) {
  const int64_t chunks = N > 0 ? (N + kRowsPerChunk - 1) / kRowsPerChunk : 0;
  auto* partial = static_cast<float*>(scratch(ScratchSlot::reduce, size_t(2 * chunks * C + 1) * sizeof(float)));
  if (chunks > 0) {
    // Chunks beyond the grid's 65535 rows of blocks loop inside the kernel.
    const dim3 grid(unsigned((C + kColumnThreads - 1) / kColumnThreads), unsigned(chunks < 65535 ? chunks : 65535));
    layernorm_dparams_partial_kernel<<<grid, kColumnThreads, 0, compute_stream()>>>(partial, partial + chunks * C, dout,
                                                                                    in, mean, rstd, N, C);
    ST_CUDA_CHECK_LAUNCH("layernorm_dparams_partial_kernel");
  }
  layernorm_dparams_sum_kernel<<<grid_for(C, kColumnThreads), kColumnThreads, 0, compute_stream()>>>(
      dweight, dbias, partial, partial + chunks * C, chunks, C, accumulate);
  ST_CUDA_CHECK_LAUNCH("layernorm_dparams_sum_kernel");
}

template <bool kResidual>
void launch_forward(void* out, bool out_bf16, float* mean, float* rstd, const float* in, float* sum_out, const float* a,
                    const float* b, const float* weight, const float* bias, int64_t N, int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  if (out_bf16) {
    layernorm_forward_kernel<kResidual><<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        static_cast<uint16_t*>(out), mean, rstd, in, sum_out, a, b, weight, bias, N, C, eps);
  } else {
    layernorm_forward_kernel<kResidual><<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        static_cast<float*>(out), mean, rstd, in, sum_out, a, b, weight, bias, N, C, eps);
  }
  ST_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps) {
  layernorm_forward(out, false, mean, rstd, in, weight, bias, N, C, eps);
}

void layernorm_forward(void* out, bool out_bf16, float* mean, float* rstd, const float* in, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps) {
  launch_forward<false>(out, out_bf16, mean, rstd, in, nullptr, nullptr, nullptr, weight, bias, N, C, eps);
}

void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        bool accumulate) {
  if (C <= 0) return;
  if (N > 0) {
    layernorm_din_kernel<false>
        <<<row_blocks(N), kThreads, 0, compute_stream()>>>(din, dout, in, weight, mean, rstd, nullptr, N, C);
    ST_CUDA_CHECK_LAUNCH("layernorm_din_kernel");
  }
  launch_dparams(dweight, dbias, dout, in, mean, rstd, N, C, accumulate);
}

void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* weight, const float* bias, int64_t N, int64_t C, float eps) {
  residual_layernorm_forward(sum_out, out, false, mean, rstd, a, b, weight, bias, N, C, eps);
}

void residual_layernorm_forward(float* sum_out, void* out, bool out_bf16, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int64_t N, int64_t C,
                                float eps) {
  launch_forward<true>(out, out_bf16, mean, rstd, nullptr, sum_out, a, b, weight, bias, N, C, eps);
}

void layernorm_backward_add(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                            const float* weight, const float* mean, const float* rstd, const float* dresidual,
                            int64_t N, int64_t C, bool accumulate) {
  if (C <= 0) return;
  if (N > 0) {
    layernorm_din_kernel<true>
        <<<row_blocks(N), kThreads, 0, compute_stream()>>>(din, dout, in, weight, mean, rstd, dresidual, N, C);
    ST_CUDA_CHECK_LAUNCH("layernorm_din_add_kernel");
  }
  launch_dparams(dweight, dbias, dout, in, mean, rstd, N, C, accumulate);
}

}  // namespace shardtrain::cuda
