#include "kernels/cuda/caching_allocator.h"

#include "kernels/cuda/context.h"
#include "runtime/core/error.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace shardtrain::cuda {
namespace {

StreamId stream_id(cudaStream_t stream) { return StreamId(reinterpret_cast<std::uintptr_t>(stream)); }
// NOLINTNEXTLINE(performance-no-int-to-ptr): the integer was this pointer
cudaStream_t as_stream(StreamId stream) { return reinterpret_cast<cudaStream_t>(std::uintptr_t(stream)); }
// NOLINTNEXTLINE(performance-no-int-to-ptr): the integer was this pointer
cudaEvent_t as_event(EventId event) { return reinterpret_cast<cudaEvent_t>(std::uintptr_t(event)); }

// CUDA's current device is per thread, and a tensor may be freed on any
// thread (a progress engine, the I/O thread): compute_stream() selects the
// process's device for the calling thread.
void use_device() { (void)compute_stream(); }

// The block pool's memory and events. Called with the pool's lock held.
class CudaSegments final : public BlockPoolBackend {
 public:
  void* allocate_segment(size_t bytes) override {
    use_device();
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: cleared, so that the pool's retry starts clean
      return nullptr;
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaMalloc", __FILE__, __LINE__);
    return ptr;
  }
  // cudaFree waits for the device, so the work that last used the segment's
  // blocks, on any stream, has finished before the driver takes it back.
  void free_segment(void* ptr, size_t /*bytes*/) override {
    use_device();
    ST_CUDA_CHECK(cudaFree(ptr));
  }

  EventId record_event(StreamId stream) override {
    use_device();
    cudaEvent_t event = nullptr;
    if (idle_.empty()) {
      ST_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    } else {
      event = idle_.back();
      idle_.pop_back();
    }
    const cudaError_t err = cudaEventRecord(event, as_stream(stream));
    if (err != cudaSuccess) {
      idle_.push_back(event);
      throw_cuda_error(err, "cudaEventRecord", __FILE__, __LINE__);
    }
    return EventId(reinterpret_cast<std::uintptr_t>(event));
  }
  bool event_done(EventId event) override {
    const cudaError_t err = cudaEventQuery(as_event(event));
    if (err == cudaSuccess) return true;
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not yet" is no error for the next check to find
      return false;
    }
    throw_cuda_error(err, "cudaEventQuery", __FILE__, __LINE__);
  }
  void wait_event(EventId event) override { ST_CUDA_CHECK(cudaEventSynchronize(as_event(event))); }
  void release_event(EventId event) override { idle_.push_back(as_event(event)); }

 private:
  std::vector<cudaEvent_t> idle_;  // completed events, recorded again rather than created anew
};

class DeviceCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const int device = current_device();
    void* ptr = nullptr;
    try {
      ptr = pool_.allocate(bytes, stream_id(compute_stream()));
    } catch (Error& e) {
      e.add_context(fmt::format("cuda:{}", device));
      throw;
    }
    account_allocation(Device::cuda(device), int64_t(bytes));
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    pool_.free(ptr);
    account_allocation(Device::cuda(current_device()), -int64_t(bytes));
  }

  BlockPool& pool() { return pool_; }

 private:
  CudaSegments segments_;
  BlockPool pool_{segments_};
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

void* allocate_workspace(size_t bytes) { return device_cache().pool().allocate(bytes, stream_id(compute_stream())); }
void free_workspace(void* ptr) { device_cache().pool().free(ptr); }

void record_stream(const void* ptr, cudaStream_t stream) {
  device_cache().pool().record_stream(ptr, stream_id(stream));
}

size_t reserved_bytes() { return device_cache().pool().stats().reserved_bytes; }

size_t cached_bytes() {
  const BlockPoolStats s = device_cache().pool().stats();
  return s.cached_bytes + s.pending_bytes;
}

void release_cached() { device_cache().pool().release_cached(); }

BlockPoolStats pool_stats() { return device_cache().pool().stats(); }

}  // namespace shardtrain::cuda
