#include "kernels/cuda/stream_sleep.h"

#include "kernels/cuda/context.h"

#include <cstdint>

namespace shardtrain::cuda {
namespace {

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void sleep_kernel(uint64_t ns) {
  const uint64_t start = global_ns();
  while (global_ns() - start < ns) {
#if __CUDA_ARCH__ >= 700
    __nanosleep(100000);  // yield the SM between looks at the timer
#endif
  }
}

}  // namespace

void sleep_on_stream(cudaStream_t stream, double seconds) {
  if (!(seconds > 0)) return;
  sleep_kernel<<<1, 1, 0, stream>>>(uint64_t(seconds * 1e9));
  ST_CUDA_CHECK_LAUNCH("sleep_kernel");
}

}  // namespace shardtrain::cuda
