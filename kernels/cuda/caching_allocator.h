// Device memory through a caching allocator: freed blocks go back to a free
// list by size class and are handed out again without cudaMalloc/cudaFree
// (both synchronize the device). Size classes: multiples of 512 bytes up to
// 1 MiB, of 2 MiB beyond, so that a step's recurring shapes find their blocks
// again. Reuse is safe without events because every kernel runs on the
// compute stream and the communication backends keep their tensors' storage
// alive until their collectives complete.
//
// Accounting: runtime/core's memory_stats(Device::cuda(i)) counts the bytes
// tensors asked for (current and peak in use); reserved_bytes() counts what
// is held from the driver, cached blocks included. When cudaMalloc fails the
// cache is released and the allocation retried once; then an Error with both
// figures.
#pragma once

#include "runtime/core/allocator.h"

#include <cstddef>

namespace shardtrain::cuda {

// The device allocator of the device brought up by init_device (registered
// for Device::cuda(index)), and page-locked host memory (cudaHostAlloc; CPU
// bytes in the accounting).
Allocator& device_allocator();
Allocator& pinned_allocator();

size_t reserved_bytes();  // held from the driver: in use + cached
size_t cached_bytes();    // free blocks kept for reuse
void release_cached();    // return the free blocks to the driver

}  // namespace shardtrain::cuda
