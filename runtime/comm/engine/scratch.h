// Staging memory of one communicator's progress engine, reused from one
// collective to the next: allocating a chunk's staging buffer per collective
// would cost a page-faulting mmap each time. Slots grow and never shrink; the
// bytes are counted by the CPU allocator like any tensor's. Only the engine's
// thread touches it.
#pragma once

#include <cstddef>
#include <vector>

namespace shardtrain::comm {

// Who uses which slot (algorithms run one at a time on an engine, so phases of
// one collective may share a slot only if they do not overlap in time).
enum ScratchSlot : int {
  kStaging0 = 0,  // ring receive staging: kStaging0 .. kStaging0 + depth - 1
  kPartial0 = 8,
  kPartial1 = 9,      // reduce-scatter's partial sums (out of place)
  kNativeTemp = 10,   // the MPI-native path's temporary
  kOneshotRecv = 11,  // AllreduceOneshot: the peers' messages
  kOneshotSend = 12,  // AllreduceOneshot: staged first fragments
  kScratchSlots = 13
};

class Scratch {
 public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // At least `bytes` bytes (64-byte aligned) for `slot`.
  std::byte* get(int slot, size_t bytes);
  // Gives every slot's memory back (the communicator's shutdown: a
  // communicator held in a static is destroyed after the allocator is).
  void release();

 private:
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::vector<Block> blocks_ = std::vector<Block>(kScratchSlots);
};

}  // namespace shardtrain::comm
