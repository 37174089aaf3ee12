#include "kernels/cuda/embedding.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned long long kNoBadId = ~0ull;

// *first_bad = the smallest position n with ids[n] outside [0, V) (an integer
// minimum: the same answer whatever the order of the atomics).
__global__ void check_ids_kernel(unsigned long long* first_bad, const int32_t* ids, int64_t N, int64_t V) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += stride) {
    const int32_t id = ids[n];
    if (id < 0 || id >= V) atomicMin(first_bad, static_cast<unsigned long long>(n));
  }
}

// One thread: the first bad id into the context's error record, unless it
// holds an earlier error; the word is set back for the next check.
__global__ void record_bad_id_kernel(DeviceErrorRecord* record, unsigned long long* first_bad, const int32_t* ids,
                                     int64_t V) {
  const unsigned long long n = *first_bad;
  if (n == kNoBadId) return;
  *first_bad = kNoBadId;
  if (record->kind != int(DeviceErrorKind::none)) return;
  record->kind = int(DeviceErrorKind::embedding_id);
  record->value = ids[n];
  record->position = static_cast<long long>(n);
  record->limit = V;
}

// The ids are checked on the device without waiting for the answer (two
// launches): a bad one is raised at a later host wait (context.h), and the
// kernels below skip it. Callers that can check on the host first do (the
// training step checks its batch's ids before the copy), so there the
// error comes before the call, as on the CPU.
void check_ids(const int32_t* ids, int64_t N, int64_t V) {
  if (N <= 0) return;
  cudaStream_t stream = compute_stream();
  unsigned long long* first_bad = device_first_bad();
  check_ids_kernel<<<grid_for(N, kThreads), kThreads, 0, stream>>>(first_bad, ids, N, V);
  ST_CUDA_CHECK_LAUNCH("check_ids_kernel");
  record_bad_id_kernel<<<1, 1, 0, stream>>>(device_error_record(), first_bad, ids, V);
  ST_CUDA_CHECK_LAUNCH("record_bad_id_kernel");
}

// A row whose id is outside [0, V) reads as zeros.
__global__ void embedding_forward_kernel(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V,
                                         int64_t C) {
  const int64_t total = N * C;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / C, c = i - n * C;
    const int64_t id = ids[n];
    out[i] = (id >= 0 && id < V) ? table[id * C + c] : 0.0f;
  }
}

// One thread per table element e = (v, c): starts from dtable[e] (accumulate)
// or 0 and adds dout[n, c] for every n with ids[n] == v, n ascending (the
// CPU's order); an id outside [0, V) matches no element. The block stages
// the ids through shared memory in tiles.
__global__ void embedding_backward_kernel(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                                          int64_t C, bool accumulate) {
  __shared__ int32_t tile[kThreads];
  const int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const bool active = e < V * C;
  const int64_t v = active ? e / C : -1;
  const int64_t c = active ? e - v * C : 0;
  float acc = (active && accumulate) ? dtable[e] : 0.0f;
  for (int64_t n0 = 0; n0 < N; n0 += kThreads) {
    const int64_t len = N - n0 < kThreads ? N - n0 : kThreads;
    if (int64_t(threadIdx.x) < len) tile[threadIdx.x] = ids[n0 + threadIdx.x];
    __syncthreads();
    if (active)
      for (int64_t k = 0; k < len; ++k)
        if (tile[k] == v) acc = __fadd_rn(acc, dout[(n0 + k) * C + c]);
    __syncthreads();  // the tile is refilled next
  }
  if (active) dtable[e] = acc;
}

__global__ void position_add_kernel(float* out, const float* table, int64_t B, int64_t T, int64_t C) {
  const int64_t total = B * T * C, plane = T * C;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    out[i] += table[i % plane];  // element (t, c) of the table
}

// One thread per (t, c): b = 0..B-1 in order, as the CPU.
__global__ void position_backward_kernel(float* dtable, const float* dout, int64_t B, int64_t T, int64_t C,
                                         bool accumulate) {
  const int64_t plane = T * C;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < plane; i += stride) {
    float acc = accumulate ? dtable[i] : 0.0f;
    for (int64_t b = 0; b < B; ++b) acc = __fadd_rn(acc, dout[b * plane + i]);
    dtable[i] = acc;
  }
}

}  // namespace

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C) {
  check_ids(ids, N, V);
  if (N <= 0 || C <= 0) return;
  embedding_forward_kernel<<<grid_for(N * C, kThreads), kThreads, 0, compute_stream()>>>(out, ids, table, N, V, C);
  ST_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C,
                        bool accumulate) {
  check_ids(ids, N, V);
  if (V <= 0 || C <= 0) return;
  const int64_t blocks = (V * C + kThreads - 1) / kThreads;
  ST_CUDA_REQUIRE(blocks <= 0x7fffffffLL,
                  "embedding_backward: table of " + std::to_string(V) + " x " + std::to_string(C) + " is too large");
  embedding_backward_kernel<<<unsigned(blocks), kThreads, 0, compute_stream()>>>(dtable, dout, ids, N, V, C,
                                                                                 accumulate);
  ST_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
}

void position_embedding_add(float* out, const float* table, int64_t B, int64_t T, int64_t C) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  position_add_kernel<<<grid_for(B * T * C, kThreads), kThreads, 0, compute_stream()>>>(out, table, B, T, C);
  ST_CUDA_CHECK_LAUNCH("position_add_kernel");
}

void position_embedding_backward(float* dtable, const float* dout, int64_t B, int64_t T, int64_t C, int64_t rows,
                                 bool accumulate) {
  if (C <= 0) return;
  // Rows [T, rows) are zeroed (rows [0, T) are written below).
  if (!accumulate && rows > T)
    ST_CUDA_CHECK(cudaMemsetAsync(dtable + (T > 0 ? T : 0) * C, 0,
                                  size_t(rows - (T > 0 ? T : 0)) * size_t(C) * sizeof(float), compute_stream()));
  if (T <= 0) return;
  position_backward_kernel<<<grid_for(T * C, kThreads), kThreads, 0, compute_stream()>>>(dtable, dout, B, T, C,
                                                                                         accumulate);
  ST_CUDA_CHECK_LAUNCH("position_backward_kernel");
}

}  // namespace shardtrain::cuda
