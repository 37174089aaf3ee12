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
  // forward() and the 2x2/2 max-pool `pool` over its output in one op
  // (ops::conv2d_maxpool_forward): `out` (undefined where the op makes no
  // NCHW output) and the pooled output, with `relu` the ReLU's after the
  // pool; backward() is as after forward().
  void forward_pooled(const Tensor& in, const Tensor& out, const Tensor& pooled, const Tensor& argmax,
                      const kernels::Pool2dShape& pool, bool relu);
  kernels::Conv2dShape shape_for(const Shape& in) const { return {in[0], C_, in[2], in[3], OC_, K_, stride_, pad_}; }
  void release_activations() override {
    in_ = Tensor();
    col_ = Tensor();
  }

 private:
  // A forward's state: its input (backward reads it) and the column buffer.
  kernels::Conv2dShape begin_forward(const Tensor& in);

  int64_t C_, OC_, K_, stride_, pad_;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor in_;
  Tensor col_;  // one sample's im2col buffer, reused by every sample and step
};

}  // namespace shardtrain::nn
