// Tree reductions over one value per thread of a block of `Threads` threads
// (a power of two), for the row kernels. Every thread gets the result; the
// order of the additions depends on Threads alone, so results are
// deterministic. The final barrier lets the caller reuse `sh` right away.
#pragma once

namespace shardtrain::cuda {

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// sh: `Threads` elements of shared memory.
template <int Threads, typename T, typename Op>
__device__ T block_reduce(T v, T* sh, Op op) {
  static_assert((Threads & (Threads - 1)) == 0, "block_reduce needs a power-of-two block");
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = Threads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();
  return r;
}

template <int Threads, typename T>
__device__ T block_sum(T v, T* sh) {
  return block_reduce<Threads>(v, sh, SumOp{});
}

template <int Threads>
__device__ float block_max(float v, float* sh) {
  return block_reduce<Threads>(v, sh, MaxOp{});
}

}  // namespace shardtrain::cuda
