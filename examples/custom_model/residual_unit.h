// A layer the library does not ship, written against its Layer interface
// (runtime/nn/layer.h): a residual MLP unit over the last dimension,
//   out = x + W2 relu(W1 x + b1) + b2,
// built from the library's Linear and ReLU layers with buffers of its own
// between them. Its backward adds the skip path's gradient to the one
// through the two linear layers.
#pragma once

#include "shardtrain/model.h"

namespace resmlp {

class ResidualUnit final : public shardtrain::nn::Layer {
 public:
  ResidualUnit(int64_t width, int64_t hidden);

  std::string kind() const override { return "residual"; }
  // W1 and b1 ("up.weight", "up.bias"), then W2 and b2 ("down.*").
  std::vector<shardtrain::nn::ParamSpec> param_specs() const override;
  void bind(std::span<const shardtrain::Tensor> params, std::span<const shardtrain::Tensor> grads) override;
  shardtrain::Shape output_shape(const shardtrain::Shape& in) const override;
  void forward(const shardtrain::Tensor& in, const shardtrain::Tensor& out) override;
  void backward(const shardtrain::Tensor& dout, const shardtrain::Tensor& din, bool accumulate) override;
  void release_activations() override;
  // Its four [batch, hidden] buffers, for `plan` and the memory accounting.
  int64_t workspace_bytes(const shardtrain::Shape& in, int64_t batch) const override;

 private:
  // The buffers grow to the largest batch seen, on the input's device.
  void ensure_buffers(int64_t batch, shardtrain::Device device);

  int64_t width_, hidden_;
  shardtrain::nn::Linear up_, down_;
  shardtrain::nn::ReLU relu_;
  // W1 x + b1 and its ReLU (kept for the backward), and their gradients.
  shardtrain::Tensor pre_, act_, dpre_, dact_;
  int64_t capacity_ = 0, batch_ = 0;
};

}  // namespace resmlp
