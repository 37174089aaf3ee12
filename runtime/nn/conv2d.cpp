#include "runtime/nn/conv2d.h"

#include "kernels/ops.h"

namespace shardtrain::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad)
    : C_(in_channels), OC_(out_channels), K_(kernel), stride_(stride), pad_(pad) {
  ST_CHECK(C_ > 0 && OC_ > 0 && K_ > 0 && stride_ > 0 && pad_ >= 0,
           "conv2d needs positive channels, kernel and stride (got {}->{} k{} s{} p{})", C_, OC_, K_, stride_, pad_);
}

std::vector<ParamSpec> Conv2d::param_specs() const {
  const int64_t fan_in = C_ * K_ * K_;
  return {{"weight", {OC_, C_, K_, K_}, Init::fan_in_uniform, fan_in, 0.0f, true},
          {"bias", {OC_}, Init::fan_in_uniform, fan_in, 0.0f, false}};
}

void Conv2d::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  weight_ = params[0];
  bias_ = params[1];
  dweight_ = grads[0];
  dbias_ = grads[1];
}

Shape Conv2d::output_shape(const Shape& in) const {
  ST_CHECK(in.ndim() == 3 && in[0] == C_, "conv2d expects samples of shape [{}, H, W], got {}", C_, in.str());
  kernels::Conv2dShape s{1, C_, in[1], in[2], OC_, K_, stride_, pad_};
  // The size formula truncates toward zero: a kernel larger than the padded
  // input would still give OH = 1, so the sizes are compared directly.
  ST_CHECK(in[1] + 2 * pad_ >= K_ && in[2] + 2 * pad_ >= K_, "conv2d kernel {} (padding {}) does not fit a {}x{} input",
           K_, pad_, in[1], in[2]);
  return Shape{OC_, s.OH(), s.OW()};
}

int64_t Conv2d::workspace_bytes(const Shape& in, int64_t /*batch*/) const {
  const kernels::Conv2dShape s{1, C_, in[1], in[2], OC_, K_, stride_, pad_};
  return 4 * s.col_floats();
}

kernels::Conv2dShape Conv2d::begin_forward(const Tensor& in) {
  in_ = in;
  const kernels::Conv2dShape s = shape_for(in.shape());
  if (!col_.defined() || col_.numel() < s.col_floats() || !(col_.device() == in.device()))
    col_ = Tensor::empty({s.col_floats()}, DType::f32, in.device());
  return s;
}

void Conv2d::forward(const Tensor& in, const Tensor& out) {
  ops::conv2d_forward(out, in, weight_, bias_, col_, begin_forward(in));
}

void Conv2d::forward_pooled(const Tensor& in, const Tensor& out, const Tensor& pooled, const Tensor& argmax,
                            const kernels::Pool2dShape& pool, bool relu) {
  ops::conv2d_maxpool_forward(pooled, argmax, out, in, weight_, bias_, col_, begin_forward(in), pool, relu);
}

void Conv2d::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  ops::conv2d_backward(din, dweight_, dbias_, dout, in_, weight_, col_, shape_for(in_.shape()), accumulate);
}

}  // namespace shardtrain::nn
