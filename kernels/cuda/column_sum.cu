#include "kernels/cuda/column_sum.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

namespace shardtrain::cuda {
namespace {

constexpr int kColumnThreads = 64;  // columns per block: a row's loads coalesce

// Stage 1: block (column group, chunk) sums the chunk's rows of each column.
__global__ void column_partial_kernel(float* partial, const float* x, int64_t N, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t chunks = (N + kColumnSumRows - 1) / kColumnSumRows;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t first = chunk * kColumnSumRows;
    const int64_t last = first + kColumnSumRows < N ? first + kColumnSumRows : N;
    float acc = 0.0f;
    for (int64_t n = first; n < last; ++n) acc = __fadd_rn(acc, x[n * C + c]);
    partial[chunk * C + c] = acc;
  }
}

// Stage 2: the chunks in order onto out (or 0).
__global__ void column_chunks_kernel(float* out, const float* partial, int64_t chunks, int64_t C, bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += stride) {
    float acc = accumulate ? out[c] : 0.0f;
    for (int64_t k = 0; k < chunks; ++k) acc = __fadd_rn(acc, partial[k * C + c]);
    out[c] = acc;
  }
}

}  // namespace

void column_sums(float* out, const float* x, int64_t N, int64_t C, bool accumulate) {
  if (C <= 0) return;
  const int64_t chunks = N > 0 ? (N + kColumnSumRows - 1) / kColumnSumRows : 0;
  auto* partial = static_cast<float*>(scratch(ScratchSlot::reduce, size_t(chunks * C + 1) * sizeof(float)));
  cudaStream_t stream = compute_stream();
  if (chunks > 0) {
    // Chunks beyond the grid's 65535 rows of blocks loop inside the kernel.
    const dim3 grid(unsigned((C + kColumnThreads - 1) / kColumnThreads), unsigned(chunks < 65535 ? chunks : 65535));
    column_partial_kernel<<<grid, kColumnThreads, 0, stream>>>(partial, x, N, C);
    ST_CUDA_CHECK_LAUNCH("column_partial_kernel");
  }
  column_chunks_kernel<<<grid_for(C, kColumnThreads), kColumnThreads, 0, stream>>>(out, partial, chunks, C, accumulate);
  ST_CUDA_CHECK_LAUNCH("column_chunks_kernel");
}

}  // namespace shardtrain::cuda
