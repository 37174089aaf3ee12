// Where a parallel strategy plugs into the model's step. DDP launches a
// bucket's all-reduce from after_backward; FSDP gathers a Block's parameters
// in before_forward/before_backward and frees or reduce-scatters after.
#pragma once

namespace shardtrain::nn {

class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  virtual void before_forward(int /*block*/) {}
  virtual void after_forward(int /*block*/) {}
  virtual void before_backward(int /*block*/) {}
  virtual void after_backward(int /*block*/) {}
};

}  // namespace shardtrain::nn
