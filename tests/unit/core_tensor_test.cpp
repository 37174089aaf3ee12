#include "runtime/core/allocator.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <vector>

using namespace shardtrain;

TEST(Allocator, AccountsCurrentAndPeakBytes) {
  const MemoryStats before = memory_stats(Device::cpu());
  {
    Tensor a = Tensor::empty({1000});                 // 4000 bytes
    Tensor b = Tensor::empty({10, 10}, DType::bf16);  // 200 bytes
    const MemoryStats during = memory_stats(Device::cpu());
    EXPECT_EQ(during.current_bytes - before.current_bytes, 4200);
    EXPECT_GE(during.peak_bytes, during.current_bytes);
    EXPECT_EQ(during.allocations - before.allocations, 2);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).current_bytes, before.current_bytes);
}

TEST(Allocator, ResetPeakForgetsFreedMemory) {
  { Tensor big = Tensor::empty({1 << 20}); }
  const int64_t current = memory_stats(Device::cpu()).current_bytes;
  EXPECT_GE(memory_stats(Device::cpu()).peak_bytes, current + (4 << 20));
  reset_peak_memory(Device::cpu());
  EXPECT_EQ(memory_stats(Device::cpu()).peak_bytes, current);
  Tensor t = Tensor::empty({256});
  EXPECT_EQ(memory_stats(Device::cpu()).peak_bytes, current + 1024);
}

TEST(Allocator, StorageIsAligned) {
  for (int n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % kAlignment, 0u) << n;
  }
}

// A step's pattern: activations held through the forward, a working copy
// allocated and freed beside each, then the backward's larger copies as the
// activations go. Repeated, the same blocks come back without the kernel
// faulting their pages in anew (glibc's defaults trim and re-fault some
// 12,000 pages over these 5 steps).
TEST(Allocator, FreedHostMemoryIsKeptForTheNextAllocations) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator stands in for glibc's malloc";
#endif
  keep_freed_host_memory();
  auto touched = [](int64_t mib) {
    Tensor t = Tensor::empty({mib << 18});
    std::fill(t.f32(), t.f32() + t.numel(), 1.0f);
    return t;
  };
  auto step = [&] {
    std::vector<Tensor> held;
    for (int layer = 0; layer < 4; ++layer) {
      held.push_back(touched(2));
      touched(4);
      held.push_back(touched(1));
    }
    for (int layer = 0; layer < 4; ++layer) {
      touched(8);
      held.pop_back();
    }
  };
  auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  for (int i = 0; i < 10; ++i) step();  // the heap settles into the pattern
  const long before = minor_faults();
  for (int i = 0; i < 5; ++i) step();
  EXPECT_LT(minor_faults() - before, 64) << "pages faulted in again for blocks freed and allocated again";
}

TEST(Allocator, UnknownDeviceIsAnError) {
  EXPECT_THROW(allocator_for(Device::cuda(0)), Error);
  EXPECT_THROW(memory_stats(Device::cuda(kMaxCudaDevices)), Error);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor flat = Tensor::zeros({10});
  Tensor v = flat.view(4, {2, 3});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  v.f32()[0] = 5.0f;
  v.f32()[5] = 7.0f;
  EXPECT_EQ(flat.f32()[4], 5.0f);
  EXPECT_EQ(flat.f32()[9], 7.0f);
  // A view keeps the storage alive after the original handle is gone.
  flat = Tensor();
  EXPECT_EQ(v.f32()[0], 5.0f);
}

TEST(Tensor, ViewOutOfBoundsIsAnError) {
  Tensor flat = Tensor::zeros({10});
  EXPECT_THROW(flat.view(8, {3}), Error);
  EXPECT_THROW(flat.view(-1, {3}), Error);
  EXPECT_NO_THROW(flat.view(7, {3}));
  EXPECT_THROW(Tensor().view(0, {1}), Error);
}

TEST(Tensor, DtypeIsChecked) {
  Tensor h = Tensor::zeros({4}, DType::bf16);
  EXPECT_THROW(h.f32(), Error);
  EXPECT_NO_THROW(h.bf16_data());
  EXPECT_EQ(h.nbytes(), 8u);
  Tensor i = Tensor::zeros({4}, DType::i32);
  EXPECT_THROW(i.f32(), Error);
  EXPECT_EQ(i.i32()[3], 0);
}

TEST(Tensor, ReshapeKeepsElements) {
  Tensor t = Tensor::zeros({2, 6});
  EXPECT_EQ(t.reshape({3, 4}).shape(), (Shape{3, 4}));
  EXPECT_THROW(t.reshape({5}), Error);
}

TEST(Shape, RowsColsAndBatched) {
  Shape s{8, 1, 28, 28};
  EXPECT_EQ(s.numel(), 8 * 784);
  EXPECT_EQ(s.cols(), 28);
  EXPECT_EQ(s.rows(), 8 * 28);
  EXPECT_EQ(batched(4, Shape{1, 28, 28}), (Shape{4, 1, 28, 28}));
  EXPECT_EQ(s.str(), "[8, 1, 28, 28]");
  EXPECT_THROW((Shape{1, 2, 3, 4, 5, 6, 7}), Error);
  EXPECT_THROW((Shape{-1}), Error);
}

TEST(Error, ContextIsPrepended) {
  try {
    with_context("reading a.h5", [] { ST_CHECK(false, "bad value {}", 3); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "reading a.h5: bad value 3");
  }
}
