#include "runtime/core/allocator.h"

#include "runtime/core/error.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace shardtrain {
namespace {

struct AtomicStats {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> high_water{0};
};

void raise_to(std::atomic<int64_t>& mark, int64_t now) {
  int64_t seen = mark.load();
  while (now > seen && !mark.compare_exchange_weak(seen, now)) {
  }
}

// Slot 0 is the CPU, 1..kMaxCudaDevices the GPUs.
std::array<AtomicStats, 1 + kMaxCudaDevices> g_stats;
std::array<std::atomic<Allocator*>, 1 + kMaxCudaDevices> g_allocators{};

size_t slot(Device d) {
  if (d.is_cpu()) return 0;
  ST_CHECK(d.index >= 0 && d.index < kMaxCudaDevices, "device {} is out of range (at most {} GPUs)", d.str(),
           kMaxCudaDevices);
  return 1 + size_t(d.index);
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    ST_CHECK(p != nullptr, "out of host memory allocating {} bytes (currently {} bytes in use)", bytes,
             memory_stats(Device::cpu()).current_bytes);
    account_allocation(Device::cpu(), int64_t(bytes));
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    std::free(ptr);
    account_allocation(Device::cpu(), -int64_t(bytes));
  }
};

}  // namespace

Allocator& allocator_for(Device device) {
  static CpuAllocator cpu;
  if (device.is_cpu()) return cpu;
  Allocator* a = g_allocators[slot(device)].load();
  ST_CHECK(a != nullptr, "no allocator for device {}: this build has no CUDA backend or no such device", device.str());
  return *a;
}

void register_allocator(Device device, Allocator* allocator) { g_allocators[slot(device)] = allocator; }

namespace {
std::atomic<Allocator*> g_pinned{nullptr};
}

Allocator& pinned_host_allocator() {
  Allocator* a = g_pinned.load();
  return a != nullptr ? *a : allocator_for(Device::cpu());
}

void register_pinned_host_allocator(Allocator* allocator) { g_pinned = allocator; }

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  // Each setting also turns off glibc's own adjustment of that threshold.
  ST_CHECK(mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1,
           "keep_freed_host_memory: glibc refused its malloc thresholds");
#endif
}

void account_allocation(Device device, int64_t delta_bytes) {
  AtomicStats& s = g_stats[slot(device)];
  int64_t now = s.current.fetch_add(delta_bytes) + delta_bytes;
  if (delta_bytes > 0) {
    s.allocations.fetch_add(1);
    raise_to(s.peak, now);
    raise_to(s.high_water, now);
  }
}

MemoryStats memory_stats(Device device) {
  const AtomicStats& s = g_stats[slot(device)];
  return {s.current.load(), s.peak.load(), s.allocations.load(), s.high_water.load()};
}

void reset_peak_memory(Device device) {
  AtomicStats& s = g_stats[slot(device)];
  s.peak = s.current.load();
}

void reset_high_water(Device device) {
  AtomicStats& s = g_stats[slot(device)];
  s.high_water = s.current.load();
}

}  // namespace shardtrain
