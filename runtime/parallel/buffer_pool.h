// FSDP's gather and gradient buffers, kept for reuse once released: a
// request for n elements gets the smallest free buffer of at least n (best
// fit; the caller uses its first n), else a new buffer of exactly n. So a
// model of equal Blocks holds K + 1 buffers of their size, and a model with
// one large Block (the MLPs' hidden layer) does not pay for it K + 1 times.
// A dry-run pool only counts: fsdp_memory() replays the hooks' order through
// one to predict the bytes.
#pragma once

#include "runtime/core/tensor.h"

#include <cstdint>
#include <map>
#include <vector>

namespace shardtrain::parallel {

class BufferPool {
 public:
  // `twin`: each buffer also gets a bf16 buffer of the same numel (mixed
  // precision's gather output or reduce-scatter input). `dry_run`: count
  // only, allocate nothing.
  BufferPool() = default;
  BufferPool(Device device, bool twin, bool dry_run = false) : device_(device), twin_(twin), dry_run_(dry_run) {}

  // A free buffer of at least `numel` elements (made if there is none): its
  // index.
  int acquire(int64_t numel);
  void release(int index);

  // The first `numel` elements of buffer `index` (and of its bf16 twin).
  Tensor f32(int index, int64_t numel) const { return buffers_[size_t(index)].f32.view(0, {numel}); }
  Tensor bf16(int index, int64_t numel) const { return buffers_[size_t(index)].bf16.view(0, {numel}); }
  int held() const { return held_; }
  // Elements of every buffer made (each also has a bf16 twin when `twin`).
  int64_t numel_made() const { return numel_made_; }

 private:
  struct Buffer {
    int64_t numel = 0;
    Tensor f32, bf16;
  };
  Device device_ = Device::cpu();
  bool twin_ = false, dry_run_ = false;
  std::vector<Buffer> buffers_;
  std::map<int64_t, std::vector<int>> free_;  // by numel
  int held_ = 0;
  int64_t numel_made_ = 0;
};

}  // namespace shardtrain::parallel
