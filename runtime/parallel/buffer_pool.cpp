#include "runtime/parallel/buffer_pool.h"

#include "runtime/core/error.h"

namespace shardtrain::parallel {

int BufferPool::acquire(int64_t numel) {
  ++held_;
  for (auto it = free_.lower_bound(numel); it != free_.end(); ++it) {
    if (it->second.empty()) continue;
    const int i = it->second.back();
    it->second.pop_back();
    return i;
  }
  Buffer b;
  b.numel = numel;
  if (!dry_run_) {
    b.f32 = Tensor::zeros({numel}, DType::f32, device_);
    if (twin_) b.bf16 = Tensor::zeros({numel}, DType::bf16, device_);
  }
  numel_made_ += numel;
  buffers_.push_back(std::move(b));
  return int(buffers_.size()) - 1;
}

void BufferPool::release(int index) {
  ST_ASSERT(index >= 0 && size_t(index) < buffers_.size() && held_ > 0);
  --held_;
  free_[buffers_[size_t(index)].numel].push_back(index);
}

}  // namespace shardtrain::parallel
