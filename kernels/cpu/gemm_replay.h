// The GEMMs of one recorded training step (GemmRecorder), replayed on memory
// laid out as the step's was: every stretch of memory the step's products
// read or wrote (each operand's extent by its address and strides,
// overlapping extents joined: the heads of one attention tensor are one
// stretch) becomes one buffer, and each call addresses it at the step's
// offsets, with the step's strides, alpha and beta (and bias). The products then meet
// the caches as they did in the step: an activation written by one call and
// read by the next, a weight read by the forward and the backward, views
// into one tensor. `shardtrain bench step` times them against the step.
// (A buffer per call instead makes the working set the sum of every call's
// operands; in bf16, where gemm() packs every operand afresh, such a replay
// ran slower than the step itself.)
#pragma once

#include "kernels/cpu/gemm.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace shardtrain::cpu {

class GemmReplay {
 public:
  // The buffers are filled with values uniform in [-1, 1].
  explicit GemmReplay(const std::vector<GemmCall>& calls);
  const std::vector<GemmCall>& calls() const { return calls_; }
  // Every call once, in the recorded order, through gemm() (this process's
  // backend and precision).
  void run();
  // The replay's address of the step's `address` (one of the operands).
  float* at(const float* address) { return static_cast<float*>(at_bytes(address)); }
  bf16* at(const bf16* address) { return static_cast<bf16*>(at_bytes(address)); }
  // The buffers: how many, and their bytes (the step's memory the products touched).
  size_t buffers() const { return stretches_.size(); }
  int64_t bytes() const;

 private:
  struct Operand {
    const void* address;
    int64_t bytes;  // its extent: ((rows - 1) * stride + cols) elements
    bool bf16;
  };
  struct Stretch {
    uintptr_t end = 0;
    bool bf16 = false;  // filled with bf16 values (gemm_bf16's operands)
    std::vector<float> memory;
    std::byte* base = nullptr;
  };
  static std::array<Operand, 4> operands(const GemmCall& c);
  void* at_bytes(const void* address);

  std::vector<GemmCall> calls_;
  std::map<uintptr_t, Stretch> stretches_;  // by the step's start address
};

}  // namespace shardtrain::cpu
