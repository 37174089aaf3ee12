// RMSNorm over the last dimension: [..., C] -> [..., C], x * rstd * gain
// with rstd = 1/sqrt(mean(x^2) + eps): a Llama Block's norms. The gain is
// initialized to 1 and not decayed; there is no bias.
#pragma once

#include "runtime/nn/layer.h"

namespace shardtrain::nn {

class RmsNorm final : public Layer {
 public:
  explicit RmsNorm(int64_t channels, float eps = 1e-5f);

  bool takes_bf16() const override { return true; }  // bf16 output; the input stays f32
  std::string kind() const override { return "rmsnorm"; }
  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  // 1/rms of every row.
  int64_t workspace_bytes(const Shape& in, int64_t batch) const override {
    return int64_t{4} * batch * (in.numel() / channels_);
  }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  // sum = a + b (sum may be a or b), out = RmsNorm(sum), in one pass; sum is
  // kept as the input for backward. The bits of add then forward.
  void forward_residual(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& out);
  // backward with din = the input gradient + dresidual (din may be dresidual).
  void backward_residual(const Tensor& dout, const Tensor& dresidual, const Tensor& din, bool accumulate);
  void release_activations() override {
    in_ = Tensor();
    rstd_ = Tensor();
  }

 private:
  void ensure_statistics(int64_t rows, Device device);

  int64_t channels_;
  float eps_;
  Tensor weight_, dweight_;
  Tensor in_;    // forward input, kept for backward
  Tensor rstd_;  // per row, grown to the largest batch seen
};

}  // namespace shardtrain::nn
