// 2-D convolution layer, NCHW, square kernel: [C, H, W] -> [OC, OH, OW].
#pragma once

#include "kernels/kernel_params.h"
#include "runtime/nn/layer.h"

namespace shardtrain::nn {

class Conv2d final : public Layer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad);

  std::string kind() const override { return "conv2d"; }
  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  // The im2col buffer: one sample at a time, whatever the batch.
  int64_t workspace_bytes(const Shape& in, int64_t batch) const override;
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override {
    in_ = Tensor();
    col_ = Tensor();
  }

 private:
  kernels::Conv2dShape shape_for(const Tensor& in) const;

  int64_t C_, OC_, K_, stride_, pad_;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor in_;
  Tensor col_;  // one sample's im2col buffer, reused by every sample and step
};

}  // namespace shardtrain::nn
