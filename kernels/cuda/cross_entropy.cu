#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/context.h"
#include "kernels/cuda/exp_nonpos.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;  // per block; one block per row
// Rows per grid: blocks loop over rows r, r + gridDim.x, ... beyond this.
constexpr int64_t kMaxRowBlocks = 65535;

// The row's maximum; max is exact, so the order does not matter. X: float,
// or uint16_t for bf16 logits (mixed precision), read as their f32 values.
template <typename X>
__device__ float row_max(const X* x, int64_t C, float* sh) {
  float m = load_f32(x, 0);
  for (int64_t i = threadIdx.x; i < C; i += kThreads) m = fmaxf(m, load_f32(x, i));
  return block_max<kThreads>(m, sh);
}

// -log softmax(x)[y] = log(sum) + (max - x_y), in double, as the CPU's row_loss.
__device__ double row_loss(float max, float sum, float x_y) { return log(double(sum)) + (double(max) - double(x_y)); }

template <typename X>
__global__ void xent_forward_kernel(double* loss, const X* logits, const int32_t* labels, int64_t N, int64_t C) {
  __shared__ float sh[kThreads];
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const X* x = logits + row * C;
    const float m = row_max(x, C, sh);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += kThreads) s += exp_nonpos(load_f32(x, i) - m);
    s = block_sum<kThreads>(s, sh);
    if (threadIdx.x == 0) loss[row] = row_loss(m, s, load_f32(x, labels[row]));
  }
}

// Forward and backward in one pass over each row. In place (dlogits ==
// logits) works: x_y is read before the barrier inside the max reduction,
// and afterwards every thread reads and writes only its own elements i until
// the final barrier, after which thread 0 adjusts d[y].
// Loss is double (the host-label form, summed on the host) or float (the
// device-label form, read back once per step). The device-label form may
// meet an unchecked label: that row's loss is NaN and nothing is read out
// of bounds (the branch is uniform across the block).
// X = uint16_t: bf16 logits, the gradient written over them in bf16. Each
// gradient value is then its f32 value rounded once: the exponentials are
// summed in one pass and computed again in the pass that writes (a bf16
// store of e, scaled later, would round twice), d[y]'s label term included.
template <class Loss, typename X>
__global__ void xent_fused_kernel(Loss* loss, X* dlogits, const X* logits, const int32_t* labels, int64_t N, int64_t C,
                                  float scale) {
  constexpr bool kF32 = std::is_same_v<X, float>;
  __shared__ float sh[kThreads];
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const X* x = logits + row * C;
    X* d = dlogits + row * C;
    const int32_t y = labels[row];
    if (y < 0 || y >= C) {
      if (threadIdx.x == 0) loss[row] = Loss(NAN);
      continue;
    }
    const float x_y = load_f32(x, y);  // read by every thread before any write below
    const float m = row_max(x, C, sh);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += kThreads) {
      const float e = exp_nonpos(load_f32(x, i) - m);
      if constexpr (kF32) d[i] = e;
      s += e;
    }
    s = block_sum<kThreads>(s, sh);
    const float k = scale / s;
    if constexpr (kF32) {
      for (int64_t i = threadIdx.x; i < C; i += kThreads) d[i] *= k;
      __syncthreads();  // d[y] has been scaled (by whichever thread owns it)
      if (threadIdx.x == 0) d[y] -= scale;
    } else {
      for (int64_t i = threadIdx.x; i < C; i += kThreads) {
        float v = exp_nonpos(load_f32(x, i) - m) * k;
        if (i == y) v -= scale;
        store_f32(d, i, v);
      }
    }
    if (threadIdx.x == 0) loss[row] = Loss(row_loss(m, s, x_y));
    __syncthreads();  // the next row's reads come after this row's writes
  }
}

// First arg-max of each row (strict '>' within a thread's ascending indices,
// the smaller index on equal values across threads), compared with the label.
template <typename X>
__global__ void count_correct_kernel(int32_t* correct, const X* logits, const int32_t* labels, int64_t N, int64_t C) {
  __shared__ float sh_v[kThreads];
  __shared__ int64_t sh_i[kThreads];
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const X* x = logits + row * C;
    float best_v = -INFINITY;
    int64_t best_i = C;  // no element yet: loses to any real one
    for (int64_t i = threadIdx.x; i < C; i += kThreads) {
      const float v = load_f32(x, i);
      if (best_i == C || v > best_v) {
        best_v = v;
        best_i = i;
      }
    }
    sh_v[threadIdx.x] = best_v;
    sh_i[threadIdx.x] = best_i;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (int(threadIdx.x) < s) {
        const float ov = sh_v[threadIdx.x + s];
        const int64_t oi = sh_i[threadIdx.x + s];
        const float mv = sh_v[threadIdx.x];
        const int64_t mi = sh_i[threadIdx.x];
        const bool take = oi != C && (mi == C || ov > mv || (ov == mv && oi < mi));
        if (take) {
          sh_v[threadIdx.x] = ov;
          sh_i[threadIdx.x] = oi;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) correct[row] = sh_i[0] == int64_t(labels[row]) ? 1 : 0;
    __syncthreads();  // sh_* are rewritten for the next row
  }
}

unsigned row_blocks(int64_t N) { return unsigned(N < kMaxRowBlocks ? N : kMaxRowBlocks); }

// Checks the host labels as the CPU does (first bad row) and copies them to
// the labels scratch slot on the compute stream.
const int32_t* upload_labels(const int32_t* host_labels, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const int32_t y = host_labels[n];
    ST_CUDA_REQUIRE(y >= 0 && y < C, "softmax cross-entropy: row " + std::to_string(n) + " has label " +
                                         std::to_string(y) + ", outside [0, " + std::to_string(C) + ")");
  }
  auto* labels = static_cast<int32_t*>(scratch(ScratchSlot::labels, size_t(N) * sizeof(int32_t)));
  ST_CUDA_CHECK(
      cudaMemcpyAsync(labels, host_labels, size_t(N) * sizeof(int32_t), cudaMemcpyHostToDevice, compute_stream()));
  return labels;
}

// Copies the N per-row values back (waiting for the compute stream).
template <class T>
std::vector<T> download(const T* device_values, int64_t N) {
  std::vector<T> host(static_cast<size_t>(N));
  ST_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), device_values, size_t(N) * sizeof(T), cudaMemcpyDeviceToHost, compute_stream()));
  sync_compute();  // and raises an error a kernel found
  return host;
}

// Rows added in order, in double: deterministic.
double sum_in_order(const std::vector<double>& row_losses) {
  double loss = 0.0;
  for (double l : row_losses) loss += l;
  return loss;
}

}  // namespace

double softmax_xent_forward(const void* logits, const int32_t* host_labels, int64_t N, int64_t C, bool bf16) {
  if (N <= 0) return 0.0;
  const int32_t* labels = upload_labels(host_labels, N, C);
  auto* row_losses = static_cast<double*>(scratch(ScratchSlot::reduce, size_t(N) * sizeof(double)));
  if (bf16) {
    xent_forward_kernel<<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        row_losses, static_cast<const uint16_t*>(logits), labels, N, C);
  } else {
    xent_forward_kernel<<<row_blocks(N), kThreads, 0, compute_stream()>>>(row_losses, static_cast<const float*>(logits),
                                                                          labels, N, C);
  }
  ST_CUDA_CHECK_LAUNCH("xent_forward_kernel");
  return sum_in_order(download(row_losses, N));
}

template <class Loss>
void launch_fused(Loss* loss, void* dlogits, const void* logits, const int32_t* labels, int64_t N, int64_t C,
                  float scale, bool bf16) {
  if (bf16) {
    xent_fused_kernel<<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        loss, static_cast<uint16_t*>(dlogits), static_cast<const uint16_t*>(logits), labels, N, C, scale);
  } else {
    xent_fused_kernel<<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        loss, static_cast<float*>(dlogits), static_cast<const float*>(logits), labels, N, C, scale);
  }
  ST_CUDA_CHECK_LAUNCH("xent_fused_kernel");
}

double softmax_xent_fused(void* dlogits, const void* logits, const int32_t* host_labels, int64_t N, int64_t C,
                          float scale, bool bf16) {
  if (N <= 0) return 0.0;
  const int32_t* labels = upload_labels(host_labels, N, C);
  auto* row_losses = static_cast<double*>(scratch(ScratchSlot::reduce, size_t(N) * sizeof(double)));
  launch_fused(row_losses, dlogits, logits, labels, N, C, scale, bf16);
  return sum_in_order(download(row_losses, N));
}

void softmax_xent_fused_rows(void* dlogits, const void* logits, const int32_t* labels, int64_t N, int64_t C,
                             float scale, float* row_loss, bool bf16) {
  if (N <= 0) return;
  launch_fused(row_loss, dlogits, logits, labels, N, C, scale, bf16);
}

int64_t count_correct(const void* logits, const int32_t* host_labels, int64_t N, int64_t C, bool bf16) {
  if (N <= 0) return 0;
  const int32_t* labels = upload_labels(host_labels, N, C);
  auto* correct = static_cast<int32_t*>(scratch(ScratchSlot::reduce, size_t(N) * sizeof(int32_t)));
  if (bf16) {
    count_correct_kernel<<<row_blocks(N), kThreads, 0, compute_stream()>>>(
        correct, static_cast<const uint16_t*>(logits), labels, N, C);
  } else {
    count_correct_kernel<<<row_blocks(N), kThreads, 0, compute_stream()>>>(correct, static_cast<const float*>(logits),
                                                                           labels, N, C);
  }
  ST_CUDA_CHECK_LAUNCH("count_correct_kernel");
  int64_t total = 0;
  for (int32_t c : download(correct, N)) total += c;
  return total;
}

}  // namespace shardtrain::cuda
