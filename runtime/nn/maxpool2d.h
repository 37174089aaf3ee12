// Max pooling layer, NCHW, square window, no padding: [C, H, W] -> [C, OH, OW].
#pragma once

#include "kernels/kernel_params.h"
#include "runtime/nn/layer.h"

namespace shardtrain::nn {

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(int64_t kernel, int64_t stride);

  std::string kind() const override { return "maxpool2d"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override { argmax_ = Tensor(); }
  // The window over `in` [B, C, H, W].
  kernels::Pool2dShape shape_over(const Shape& in) const { return {in[0], in[1], in[2], in[3], K_, stride_}; }
  // A forward of shape s that another op computes (a convolution pooled as
  // it is made, ops::conv2d_maxpool_forward): the state backward reads, and
  // the arg-max buffer for that op to fill.
  Tensor begin_forward(const kernels::Pool2dShape& s, Device device);
  // The argmax of every output element (i32).
  int64_t workspace_bytes(const Shape& in, int64_t batch) const override {
    return 4 * batch * output_shape(in).numel();
  }

 private:
  int64_t K_, stride_;
  kernels::Pool2dShape shape_{};
  Tensor argmax_;  // i32, grows to the largest batch seen, then reused
};

}  // namespace shardtrain::nn
