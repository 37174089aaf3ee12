// A Block whose compute is emulated (runtime.emulate.compute = "profile"):
// it holds the real Block, so its parameters, their layout, its shapes and
// its binding are the real ones and every strategy moves the real bytes,
// but its forward and backward are waits of a profiled time on the rank's
// ComputeClock. Nothing is computed: the output is a buffer of the right
// shape whose values mean nothing, and no gradient is written.
#pragma once

#include "runtime/nn/block.h"

#include <memory>

namespace shardtrain::nn {

class EmulatedBlock final : public Block {
 public:
  // forward_s, backward_s: the Block's times per pass of `profiled_batch`
  // samples (a pass of B samples waits B / profiled_batch of them);
  // in_sample: the shape of one sample entering the Block.
  EmulatedBlock(std::unique_ptr<Block> real, double forward_s, double backward_s, int64_t profiled_batch,
                const Shape& in_sample);

  std::vector<ParamSpec> param_specs() const override { return real_->param_specs(); }
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override { real_->bind(params, grads); }
  Shape output_shape(const Shape& in) const override { return real_->output_shape(in); }
  // Settings reach the real Block (its time is the profile's, whatever they are).
  void set_activation_dtype(DType dtype) override { real_->set_activation_dtype(dtype); }
  bool can_recompute() const override { return real_->can_recompute(); }
  void set_recompute(Recompute mode) override { real_->set_recompute(mode); }
  Tensor forward(const Tensor& in) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override;
  std::string describe() const override;
  // The output buffer only: nothing else is kept.
  int64_t activation_bytes(int64_t batch) const override;
  int64_t kept_bf16_bytes(int64_t) const override { return 0; }

 private:
  double share(int64_t batch) const { return double(batch) / double(profiled_batch_); }

  std::unique_ptr<Block> real_;
  double forward_s_, backward_s_;
  int64_t profiled_batch_;
  int64_t out_sample_numel_;
  Tensor output_;
  int64_t batch_ = 0;
};

}  // namespace shardtrain::nn
