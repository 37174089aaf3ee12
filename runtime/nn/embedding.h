// Token + learned position embedding: int32 token ids [B, T] ->
// [B, T, C] = wte[id] + wpe[t]. wte [vocab, C] and wpe [max_positions, C]
// are initialized N(0, 0.02^2), as in GPT-2. max_positions = 0: no position
// table, out = wte[id] (a Llama's: RoPE gives the positions). As a model's first layer it
// computes no input gradient (ids have none).
#pragma once

#include "runtime/nn/layer.h"

#include <memory>

namespace shardtrain::nn {

class Embedding final : public Layer {
 public:
  Embedding(int64_t vocab, int64_t max_positions, int64_t channels);

  std::string kind() const override { return "embedding"; }
  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  // [T] -> [T, C], T <= max_positions.
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override { ids_ = Tensor(); }
  // Shares wte with a head (Linear::use_tied_weight): bind() publishes its
  // views there, and backward adds to the gradient the head wrote.
  void share_weight(std::shared_ptr<TiedWeight> tied) { tied_ = std::move(tied); }

 private:
  int64_t vocab_, max_positions_, channels_;
  Tensor wte_, wpe_, dwte_, dwpe_;
  Tensor ids_;  // forward input, kept for backward
  std::shared_ptr<TiedWeight> tied_;
};

}  // namespace shardtrain::nn
