// Pointwise activations as layers.
#pragma once

#include "runtime/nn/layer.h"

namespace shardtrain::nn {

class ReLU final : public Layer {
 public:
  std::string kind() const override { return "relu"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override { out_ = Tensor(); }

 private:
  Tensor out_;  // ReLU's backward needs only its output
};

class GELU final : public Layer {
 public:
  std::string kind() const override { return "gelu"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override { in_ = Tensor(); }

 private:
  Tensor in_;
};

}  // namespace shardtrain::nn
