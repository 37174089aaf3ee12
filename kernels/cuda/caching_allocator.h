// Device memory through a stream-ordered caching allocator: the logic of
// runtime/core/block_pool.h (PyTorch's CUDACachingAllocator's semantics) over
// cudaMalloc, cudaFree and CUDA events. Memory comes from cudaMalloc in
// segments (2 MiB for requests up to 1 MiB, beyond them the request rounded
// up to 2 MiB) and is handed out in blocks cut from them: the smallest free
// block that fits, split, and merged with its free neighbours when freed. A
// step's recurring shapes are then served without cudaMalloc or cudaFree
// (both synchronize the device): after the first steps, pool_stats()'s
// backend_allocations stops growing.
//
// Streams: an allocation belongs to the compute stream, where every kernel
// runs, and its block, once freed, is handed out again at once to later work
// on that stream, which runs after the work that used it. Memory that
// another stream also reads or writes (NCCL on the comm stream, the staging
// of MPI collectives) must either stay allocated until that stream's work is
// done, as the communication backends do, or be marked with record_stream:
// its block is then held back at its free until an event recorded on that
// stream at the free has completed (queried on later allocations, waited for
// only before an allocation fails and in release_cached).
//
// Accounting: runtime/core's memory_stats(Device::cuda(i)) counts the bytes
// tensors asked for (current and peak in use); reserved_bytes() counts what
// is held from the driver, cached blocks included. When cudaMalloc finds no
// room, the allocator waits for the blocks other streams hold, gives every
// wholly free segment back and tries once more; then an Error naming the
// device and the bytes asked for, in use and reserved.
#pragma once

#include "runtime/core/allocator.h"
#include "runtime/core/block_pool.h"

#include <cuda_runtime.h>

#include <cstddef>

namespace shardtrain::cuda {

// The device allocator of the device brought up by init_device (registered
// for Device::cuda(index)), and page-locked host memory (cudaHostAlloc; CPU
// bytes in the accounting).
Allocator& device_allocator();
Allocator& pinned_allocator();

// Device memory on the compute stream from the same pool, outside the
// tensors' accounting: the kernels' workspaces (context.h scratch). Freed
// memory goes back to the pool stream-ordered, so a workspace that grows
// neither waits for the device nor calls cudaFree.
void* allocate_workspace(size_t bytes);
void free_workspace(void* ptr);

// Marks the device allocation holding `ptr` (any address inside a tensor's
// storage) as used by work issued to `stream` too, e.g. a collective on
// comm_stream(); call it after issuing that work and before the storage is
// freed. The block is not reused until everything issued to `stream` before
// its free has completed. The compute stream and nullptr are ignored; an
// address the allocator did not hand out is an Error.
void record_stream(const void* ptr, cudaStream_t stream);

size_t reserved_bytes();  // held from the driver: in use + cached
size_t cached_bytes();    // freed blocks kept for reuse (those other streams still use included)
// Waits for the blocks other streams still use, then returns every segment
// with nothing allocated in it to the driver.
void release_cached();
// Segments held and obtained so far, bytes in each state.
BlockPoolStats pool_stats();

}  // namespace shardtrain::cuda
