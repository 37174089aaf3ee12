#include "runtime/nn/layernorm.h"

#include "kernels/ops.h"

namespace shardtrain::nn {

LayerNorm::LayerNorm(int64_t channels, float eps) : channels_(channels), eps_(eps) {
  ST_CHECK(channels > 0, "layernorm needs a positive width, got {}", channels);
}

std::vector<ParamSpec> LayerNorm::param_specs() const {
  return {{"weight", {channels_}, Init::ones, 1, 0.0f, false}, {"bias", {channels_}, Init::zeros, 1, 0.0f, false}};
}

void LayerNorm::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  weight_ = params[0];
  bias_ = params[1];
  dweight_ = grads[0];
  dbias_ = grads[1];
}

Shape LayerNorm::output_shape(const Shape& in) const {
  ST_CHECK(in.ndim() >= 1 && in.cols() == channels_, "layernorm over {} channels got a sample of shape {}", channels_,
           in.str());
  return in;
}

void LayerNorm::ensure_statistics(int64_t rows, Device device) {
  if (!mean_.defined() || mean_.numel() < rows || !(mean_.device() == device)) {
    mean_ = Tensor::empty({rows}, DType::f32, device);
    rstd_ = Tensor::empty({rows}, DType::f32, device);
  }
}

void LayerNorm::forward(const Tensor& in, const Tensor& out) {
  in_ = in;
  ensure_statistics(in.numel() / channels_, in.device());
  ops::layernorm_forward(out, mean_, rstd_, in, weight_, bias_, eps_);
}

void LayerNorm::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  ops::layernorm_backward(din, dweight_, dbias_, dout, in_, weight_, mean_, rstd_, accumulate);
}

void LayerNorm::forward_residual(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& out) {
  in_ = sum;
  ensure_statistics(sum.numel() / channels_, sum.device());
  ops::residual_layernorm_forward(sum, out, mean_, rstd_, a, b, weight_, bias_, eps_);
}

void LayerNorm::backward_residual(const Tensor& dout, const Tensor& dresidual, const Tensor& din, bool accumulate) {
  ops::layernorm_backward_add(din, dweight_, dbias_, dout, in_, weight_, mean_, rstd_, dresidual, accumulate);
}

}  // namespace shardtrain::nn
