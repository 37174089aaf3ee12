// The stream-ordered caching allocator on a real device: a step's recurring
// shapes stop asking the driver for memory after the first step, memory
// another stream still uses (record_stream) is not handed out again until
// that stream is done, and a growing kernel workspace gives nothing back
// to the driver (no cudaFree, which would wait for the device).
#include "runtime/core/tensor.h"
#include "tests/gpu/gpu_test_util.h"

#if defined(SHARDTRAIN_HAVE_CUDA)
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/stream_sleep.h"

#include <cuda_runtime.h>
#endif

#include <gtest/gtest.h>

#include <vector>

using namespace shardtrain;
using namespace shardtrain::gpu_test;

#if defined(SHARDTRAIN_HAVE_CUDA)

namespace {

// A step's worth of tensors: the shapes a GPT step allocates and frees.
void one_step() {
  std::vector<Tensor> held;
  for (const int64_t n : {int64_t(1) << 20, int64_t(3) << 18, int64_t(4096), int64_t(768), int64_t(50257) * 96})
    held.push_back(Tensor::empty({n}, DType::f32, gpu()));
  held.push_back(Tensor::empty({int64_t(1) << 22}, DType::bf16, gpu()));
}

}  // namespace

TEST(CudaAllocator, RecurringShapesStopAskingTheDriver) {
  ST_REQUIRE_GPU();
  one_step();
  const BlockPoolStats warm = cuda::pool_stats();
  for (int i = 0; i < 5; ++i) one_step();
  const BlockPoolStats after = cuda::pool_stats();
  EXPECT_EQ(after.backend_allocations, warm.backend_allocations);
  EXPECT_EQ(after.backend_frees, warm.backend_frees);
  EXPECT_EQ(after.allocated_bytes, warm.allocated_bytes);  // everything freed again
}

TEST(CudaAllocator, RecordStreamHoldsABlockUntilThatStreamIsDone) {
  ST_REQUIRE_GPU();
  const int64_t n = int64_t(3) << 20;  // a large-pool block of its own size class
  Tensor x = Tensor::empty({n}, DType::f32, gpu());
  Tensor y = Tensor::empty({n}, DType::f32, gpu());
  const void* x_addr = x.raw();
  // The comm stream reads x after a 300 ms wait; the compute stream is idle.
  cuda::sleep_on_stream(cuda::comm_stream(), 0.3);
  ASSERT_EQ(cudaMemcpyAsync(y.raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, cuda::comm_stream()), cudaSuccess);
  cuda::record_stream(x.raw(), cuda::comm_stream());
  x = Tensor();  // freed while the comm stream has not read it yet
  EXPECT_GE(cuda::pool_stats().pending_bytes, size_t(n) * 4);
  Tensor again = Tensor::empty({n}, DType::f32, gpu());
  EXPECT_NE(again.raw(), x_addr) << "handed out while the comm stream still reads it";
  ASSERT_EQ(cudaStreamSynchronize(cuda::comm_stream()), cudaSuccess);
  again = Tensor();
  Tensor later = Tensor::empty({n}, DType::f32, gpu());  // the pending block is free now
  EXPECT_EQ(cuda::pool_stats().pending_bytes, size_t(0));
  cuda::sync_compute();
}

TEST(CudaAllocator, GrowingAWorkspaceGivesNothingBackToTheDriver) {
  ST_REQUIRE_GPU();
  const BlockPoolStats before = cuda::pool_stats();
  size_t bytes = size_t(1) << 16;
  for (int i = 0; i < 6; ++i, bytes *= 4) ASSERT_NE(cuda::scratch(cuda::ScratchSlot::conv_partials, bytes), nullptr);
  EXPECT_EQ(cuda::pool_stats().backend_frees, before.backend_frees);
  cuda::sync_compute();
}

#else
TEST(CudaAllocator, NotBuilt) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }
#endif
