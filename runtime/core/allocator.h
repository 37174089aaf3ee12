// Aligned allocation with byte accounting per device. Every tensor's storage
// comes through here, so current and peak bytes per device are exact; FSDP's
// memory figures and the telemetry's memory counters read them.
#pragma once

#include "runtime/core/device.h"

#include <cstddef>
#include <cstdint>

namespace shardtrain {

// Storage alignment: a cache line, and enough for AVX-512 loads.
inline constexpr size_t kAlignment = 64;

struct MemoryStats {
  int64_t current_bytes = 0;     // bytes allocated and not yet freed
  int64_t peak_bytes = 0;        // high-water mark of current_bytes since the last reset
  int64_t allocations = 0;       // number of allocate() calls since start
  int64_t high_water_bytes = 0;  // high-water mark since reset_high_water (not reset per step)
};

// A device's allocator. Backends (CPU here, CUDA's caching allocator later)
// implement raw_allocate/raw_free; accounting is common and lives in account().
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
};

// The allocator for a device. CPU is always available; a CUDA allocator is
// registered by the CUDA backend when it is built and a device is present.
Allocator& allocator_for(Device device);
void register_allocator(Device device, Allocator* allocator);
// Page-locked host memory for copies to and from a GPU (counted as CPU bytes);
// the plain CPU allocator until the CUDA backend registers its own.
Allocator& pinned_host_allocator();
void register_pinned_host_allocator(Allocator* allocator);

// Has glibc's malloc keep the host memory the process frees for its next
// allocations rather than return it to the kernel. A training step
// allocates and frees the same sizes every step (mixed precision's f32
// working copies of bf16 activations, several MiB each); by default glibc
// hands a freed block above its (self-adjusting) mmap threshold, or the top
// of its heap past its trim threshold, back to the kernel, which faults it
// in again, zeroed, a page at a time on the next step. After this call
// blocks up to 32 MiB (glibc's largest mmap threshold) come from the heap
// and up to 1 GiB of free heap top is kept: the process's resident memory
// stays near its peak. Larger blocks still go back. Call it before the
// first allocations (the shardtrain program does, first thing); without
// glibc it does nothing.
void keep_freed_host_memory();

// Accounting, called by allocators: +bytes on allocate, -bytes on free.
void account_allocation(Device device, int64_t delta_bytes);

MemoryStats memory_stats(Device device);
void reset_peak_memory(Device device);  // peak := current
void reset_high_water(Device device);   // high_water := current (e.g. when training starts)

}  // namespace shardtrain
