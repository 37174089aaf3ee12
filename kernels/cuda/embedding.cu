#include "kernels/cuda/embedding.h"

#include "kernels/cuda/context.h"

#include <cub/device/device_radix_sort.cuh>
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

// Keys for the sort: a token's id, or V for an id outside [0, V) (sorted
// last and skipped); values: the token's position.
__global__ void sort_keys_kernel(int32_t* keys, int32_t* positions, const int32_t* ids, int64_t N, int64_t V) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += stride) {
    const int32_t id = ids[n];
    keys[n] = (id >= 0 && id < V) ? id : int32_t(V);
    positions[n] = int32_t(n);
  }
}

// One block per sorted position i; the block whose i starts a run of equal
// ids sums that id's rows: for each column, from dtable's row (accumulate)
// or 0, adding dout[position] in ascending positions (the radix sort is
// stable), the CPU's order, so the sums are the CPU's bits. Work is the
// number of tokens times C, whatever the vocabulary.
__global__ void embedding_segment_sum_kernel(float* dtable, const float* dout, const int32_t* keys,
                                             const int32_t* positions, int64_t N, int64_t V, int64_t C,
                                             bool accumulate) {
  const int64_t i = blockIdx.x;
  const int32_t v = keys[i];
  if (v >= V || (i > 0 && keys[i - 1] == v)) return;
  int64_t end = i + 1;
  while (end < N && keys[end] == v) ++end;
  float* row = dtable + int64_t(v) * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = accumulate ? row[c] : 0.0f;
    for (int64_t k = i; k < end; ++k) acc = __fadd_rn(acc, dout[int64_t(positions[k]) * C + c]);
    row[c] = acc;
  }
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
  cudaStream_t stream = compute_stream();
  // Rows no token names keep their value (accumulate) or become zeros.
  if (!accumulate) ST_CUDA_CHECK(cudaMemsetAsync(dtable, 0, size_t(V * C) * sizeof(float), stream));
  if (N <= 0) return;
  ST_CUDA_REQUIRE(N <= 0x7fffffffLL && V < 0x7fffffffLL, "embedding_backward: " + std::to_string(N) +
                                                             " tokens or a vocabulary of " + std::to_string(V) +
                                                             " exceed the sort's 32-bit keys");
  // Keys need only the bits of V (the largest key): fewer radix passes.
  int end_bit = 1;
  while (end_bit < 31 && (int64_t(1) << end_bit) <= V) ++end_bit;
  size_t temp_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), int(N), 0, end_bit, stream));
  const size_t arrays = 4 * size_t(N) * sizeof(int32_t);
  auto* base = static_cast<unsigned char*>(scratch(ScratchSlot::embedding_sort, arrays + temp_bytes));
  auto* keys_in = reinterpret_cast<int32_t*>(base);
  int32_t* keys = keys_in + N;
  int32_t* pos_in = keys + N;
  int32_t* pos = pos_in + N;
  sort_keys_kernel<<<grid_for(N, kThreads), kThreads, 0, stream>>>(keys_in, pos_in, ids, N, V);
  ST_CUDA_CHECK_LAUNCH("sort_keys_kernel");
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + arrays, temp_bytes, keys_in, keys, pos_in, pos, int(N), 0,
                                                end_bit, stream));
  const int threads = C >= 256 ? 256 : int((C + 31) / 32 * 32);
  embedding_segment_sum_kernel<<<unsigned(N), threads, 0, stream>>>(dtable, dout, keys, pos, N, V, C, accumulate);
  ST_CUDA_CHECK_LAUNCH("embedding_segment_sum_kernel");
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
