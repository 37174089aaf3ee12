// fsdp_memory(): the bytes an FSDP rank holds, from the layout and the order
// in which the hooks (fsdp.cpp) take and release buffers.
#include "runtime/parallel/fsdp.h"

#include <algorithm>
#include <deque>

namespace shardtrain::parallel {
namespace {

// Fsdp's buffer traffic, replayed through dry-run pools: two training steps
// (micro-batches, forward and backward) around an evaluation's forward, the
// same decisions in the same order as Fsdp's hooks (before_forward's
// prefetch window, after_forward's free, before_backward's gradient buffer
// and its wait for the oldest reduce-scatter, wait_gradients at the end).
class Replay {
 public:
  Replay(const ShardLayout& layout, const FsdpOptions& o, bool accumulation)
      : layout_(layout),
        n_(int(layout.blocks().size())),
        k_(o.prefetch),
        grad_op_(o.mode == ShardingMode::shard_grad_op),
        accum_(accumulation),
        gather_limit_(gather_buffer_limit(o, n_)),
        grad_limit_(grad_buffer_limit(o, n_)),
        gathers_(Device::cpu(), false, true),
        grads_(Device::cpu(), false, true),
        held_(size_t(n_), -1) {}

  void step(int micro_batches) {
    for (int m = 0; m < micro_batches; ++m) {
      forward();
      backward(/*sync=*/m == micro_batches - 1);
    }
    while (!reduces_.empty()) advance();
  }
  void forward() {
    for (int b = 0; b < n_; ++b) {
      if (b == 0)
        for (int i = 0; i < n_; ++i) free(i);
      gather(b);
      for (int j = b + 1; j <= std::min(n_ - 1, b + k_) && gathers_.held() < gather_limit_; ++j) gather(j);
      if (!grad_op_ && b != n_ - 1) free(b);
    }
  }
  int64_t gather_numel() const { return gathers_.numel_made(); }
  int64_t grad_numel() const { return grads_.numel_made(); }

 private:
  void backward(bool sync) {
    for (int b = n_ - 1; b >= 0; --b) {
      gather(b);
      for (int j = b - 1; j >= std::max(0, b - k_) && gathers_.held() < gather_limit_; --j) gather(j);
      int g = -1;
      if (!accum_) g = take_grad(b);
      if (sync) reduces_.push_back(g >= 0 ? g : take_grad(b));
      free(b);
    }
  }
  int take_grad(int b) {
    while (grads_.held() >= grad_limit_) advance();
    return grads_.acquire(layout_.padded_numel(b));
  }
  void advance() {  // the oldest reduce-scatter completes: its buffer is free
    grads_.release(reduces_.front());
    reduces_.pop_front();
  }
  void gather(int b) {
    if (held_[size_t(b)] < 0) held_[size_t(b)] = gathers_.acquire(layout_.padded_numel(b));
  }
  void free(int b) {
    if (held_[size_t(b)] >= 0) gathers_.release(std::exchange(held_[size_t(b)], -1));
  }

  const ShardLayout& layout_;
  int n_, k_;
  bool grad_op_, accum_;
  int gather_limit_, grad_limit_;
  BufferPool gathers_, grads_;
  std::vector<int> held_;
  std::deque<int> reduces_;
};

}  // namespace

FsdpMemory fsdp_memory(const nn::FlatParameters& flat, int world, int state_floats_per_param,
                       const FsdpOptions& options, bool accumulation) {
  constexpr int64_t f32 = sizeof(float), bf16 = 2;
  const ShardLayout layout(flat.blocks(), world);
  Replay replay(layout, options, accumulation);
  replay.step(accumulation ? 2 : 1);
  replay.forward();  // an evaluation
  replay.step(accumulation ? 2 : 1);
  FsdpMemory m;
  m.param_shard_bytes = layout.shard_numel() * f32;
  m.grad_shard_bytes = layout.shard_numel() * f32;
  m.optimizer_shard_bytes = layout.shard_numel() * state_floats_per_param * f32;
  m.persistent_bytes = m.param_shard_bytes + m.grad_shard_bytes + m.optimizer_shard_bytes;
  m.gather_buffer_bytes = replay.gather_numel() * f32;
  m.grad_buffer_bytes = replay.grad_numel() * f32;
  m.accumulator_bytes = accumulation ? flat.numel() * f32 : 0;
  if (options.param_dtype == DType::bf16)
    m.low_precision_bytes += (layout.shard_numel() + replay.gather_numel()) * bf16;
  if (options.reduce_dtype == DType::bf16) m.low_precision_bytes += (layout.shard_numel() + replay.grad_numel()) * bf16;
  m.ddp_persistent_bytes = flat.numel() * f32 * (2 + state_floats_per_param);
  m.implementation_bytes =
      m.persistent_bytes + m.gather_buffer_bytes + m.grad_buffer_bytes + m.accumulator_bytes + m.low_precision_bytes;
  return m;
}

}  // namespace shardtrain::parallel
