#include "runtime/comm/engine/scratch.h"

#include "runtime/core/allocator.h"
#include "runtime/core/error.h"

namespace shardtrain::comm {

Scratch::~Scratch() { release(); }

void Scratch::release() {
  for (Block& b : blocks_) {
    if (b.ptr) allocator_for(Device::cpu()).deallocate(b.ptr, b.bytes);
    b = Block{};
  }
}

std::byte* Scratch::get(int slot, size_t bytes) {
  ST_ASSERT(slot >= 0 && slot < kScratchSlots);
  Block& b = blocks_[size_t(slot)];
  if (b.bytes < bytes) {
    Allocator& a = allocator_for(Device::cpu());
    if (b.ptr) a.deallocate(b.ptr, b.bytes);
    b.ptr = nullptr;
    b.bytes = 0;
    b.ptr = a.allocate(bytes);
    b.bytes = bytes;
  }
  return static_cast<std::byte*>(b.ptr);
}

}  // namespace shardtrain::comm
