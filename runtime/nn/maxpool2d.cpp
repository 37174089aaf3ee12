#include "runtime/nn/maxpool2d.h"

#include "kernels/ops.h"

namespace shardtrain::nn {

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride) : K_(kernel), stride_(stride) {
  ST_CHECK(K_ > 0 && stride_ > 0, "maxpool2d needs a positive window and stride (got {}, {})", K_, stride_);
}

Shape MaxPool2d::output_shape(const Shape& in) const {
  ST_CHECK(in.ndim() == 3, "maxpool2d expects samples of shape [C, H, W], got {}", in.str());
  kernels::Pool2dShape s{1, in[0], in[1], in[2], K_, stride_};
  ST_CHECK(in[1] >= K_ && in[2] >= K_, "maxpool2d window {} does not fit a {}x{} input", K_, in[1], in[2]);
  return Shape{in[0], s.OH(), s.OW()};
}

Tensor MaxPool2d::begin_forward(const kernels::Pool2dShape& s, Device device) {
  shape_ = s;
  const int64_t outputs = s.B * s.C * s.OH() * s.OW();
  if (!argmax_.defined() || argmax_.numel() < outputs || !(argmax_.device() == device))
    argmax_ = Tensor::empty({outputs}, DType::i32, device);
  return argmax_.view(0, {outputs});
}

void MaxPool2d::forward(const Tensor& in, const Tensor& out) {
  const Tensor argmax = begin_forward(shape_over(in.shape()), in.device());
  ops::maxpool2d_forward(out, argmax, in, shape_);
}

void MaxPool2d::backward(const Tensor& dout, const Tensor& din, bool /*accumulate*/) {
  if (din.defined()) ops::maxpool2d_backward(din, dout, argmax_.view(0, {dout.numel()}), shape_);
}

}  // namespace shardtrain::nn
