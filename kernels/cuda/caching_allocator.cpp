#include "kernels/cuda/caching_allocator.h"

#include "kernels/cuda/context.h"
#include "runtime/core/error.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

namespace shardtrain::cuda {
namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeGranule = size_t(2) << 20;
constexpr size_t kSmallLimit = size_t(1) << 20;

size_t size_class(size_t bytes) {
  if (bytes <= kSmallLimit) return (bytes + kSmallGranule - 1) / kSmallGranule * kSmallGranule;
  return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

class DeviceCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t cls = size_class(bytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end()) {
        p = it->second;
        free_.erase(it);
        cached_ -= cls;
      }
    }
    if (p == nullptr) p = fresh(cls, bytes);
    account_allocation(Device::cuda(current_device()), int64_t(bytes));
    return p;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    const size_t cls = size_class(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.emplace(cls, ptr);
      cached_ += cls;
    }
    account_allocation(Device::cuda(current_device()), -int64_t(bytes));
  }

  void release() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      reserved_ -= cached_;
      cached_ = 0;
    }
    for (auto& [cls, p] : blocks) cudaFree(p);  // implicitly waits for the device
  }

  size_t reserved() {
    std::lock_guard<std::mutex> lock(mu_);
    return reserved_;
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

 private:
  void* fresh(size_t cls, size_t bytes) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, cls);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it, give back the cache, try once more
      release();
      err = cudaMalloc(&p, cls);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      const MemoryStats s = memory_stats(Device::cuda(current_device()));
      throw Error(
          fmt::format("out of GPU memory on cuda:{} allocating {} bytes ({}): {} bytes in use by tensors, "
                      "{} bytes reserved from the driver",
                      current_device(), bytes, cudaGetErrorString(err), s.current_bytes, reserved()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    reserved_ += cls;
    return p;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t reserved_ = 0, cached_ = 0;
};

class PinnedHostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    ST_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    account_allocation(Device::cpu(), int64_t(bytes));
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    cudaFreeHost(ptr);
    account_allocation(Device::cpu(), -int64_t(bytes));
  }
};

DeviceCachingAllocator& device_cache() {
  static auto* a = new DeviceCachingAllocator;  // outlives every tensor (never destroyed)
  return *a;
}

}  // namespace

Allocator& device_allocator() { return device_cache(); }

Allocator& pinned_allocator() {
  static auto* a = new PinnedHostAllocator;
  return *a;
}

size_t reserved_bytes() { return device_cache().reserved(); }
size_t cached_bytes() { return device_cache().cached(); }
void release_cached() { device_cache().release(); }

}  // namespace shardtrain::cuda
