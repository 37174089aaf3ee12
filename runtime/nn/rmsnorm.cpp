#include "runtime/nn/rmsnorm.h"

#include "kernels/ops.h"

namespace shardtrain::nn {

RmsNorm::RmsNorm(int64_t channels, float eps) : channels_(channels), eps_(eps) {
  ST_CHECK(channels > 0, "rmsnorm needs a positive width, got {}", channels);
  ST_CHECK(eps > 0.0f, "rmsnorm needs a positive epsilon, got {}", eps);
}

std::vector<ParamSpec> RmsNorm::param_specs() const { return {{"weight", {channels_}, Init::ones, 1, 0.0f, false}}; }

void RmsNorm::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  weight_ = params[0];
  dweight_ = grads[0];
}

Shape RmsNorm::output_shape(const Shape& in) const {
  ST_CHECK(in.ndim() >= 1 && in.cols() == channels_, "rmsnorm over {} channels got a sample of shape {}", channels_,
           in.str());
  return in;
}

void RmsNorm::ensure_statistics(int64_t rows, Device device) {
  if (!rstd_.defined() || rstd_.numel() < rows || !(rstd_.device() == device))
    rstd_ = Tensor::empty({rows}, DType::f32, device);
}

void RmsNorm::forward(const Tensor& in, const Tensor& out) {
  in_ = in;
  ensure_statistics(in.numel() / channels_, in.device());
  ops::rmsnorm_forward(out, rstd_, in, weight_, eps_);
}

void RmsNorm::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  ops::rmsnorm_backward(din, dweight_, dout, in_, weight_, rstd_, Tensor(), accumulate);
}

void RmsNorm::forward_residual(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& out) {
  in_ = sum;
  ensure_statistics(sum.numel() / channels_, sum.device());
  ops::residual_rmsnorm_forward(sum, out, rstd_, a, b, weight_, eps_);
}

void RmsNorm::backward_residual(const Tensor& dout, const Tensor& dresidual, const Tensor& din, bool accumulate) {
  ops::rmsnorm_backward(din, dweight_, dout, in_, weight_, rstd_, dresidual, accumulate);
}

}  // namespace shardtrain::nn
