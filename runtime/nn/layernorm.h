// LayerNorm over the last dimension: [..., C] -> [..., C], with a learned
// gain (init 1) and bias (init 0), neither decayed.
#pragma once

#include "runtime/nn/layer.h"

namespace shardtrain::nn {

class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(int64_t channels, float eps = 1e-5f);

  bool takes_bf16() const override { return true; }  // bf16 output; the input stays f32
  std::string kind() const override { return "layernorm"; }
  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  // Mean and 1/std of every row.
  int64_t workspace_bytes(const Shape& in, int64_t batch) const override {
    return int64_t{8} * batch * (in.numel() / channels_);  // two floats per row
  }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& in, const Tensor& out) override;
  // din is required (a LayerNorm is never a model's first layer on data).
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  // For a Block whose residual connection feeds this LayerNorm: the add and
  // the normalization in one pass (ops::residual_layernorm_forward), sum =
  // a + b (sum may be a or b), out = LayerNorm(sum); sum is kept as the input
  // for backward, as forward keeps in. The same bits as add then forward.
  void forward_residual(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& out);
  // backward with the residual's gradient added as din is written
  // (ops::layernorm_backward_add): din = this LayerNorm's input gradient +
  // dresidual (din may be dresidual). The same bits as backward then add.
  void backward_residual(const Tensor& dout, const Tensor& dresidual, const Tensor& din, bool accumulate);
  void release_activations() override {
    in_ = Tensor();
    mean_ = Tensor();
    rstd_ = Tensor();
  }

 private:
  // mean_/rstd_ for at least `rows` rows on `device`: reallocated only when
  // too small or elsewhere, so the largest batch seen sets their size.
  void ensure_statistics(int64_t rows, Device device);

  int64_t channels_;
  float eps_;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor in_;           // forward input, kept for backward
  Tensor mean_, rstd_;  // per row, grown to the largest batch seen
};

}  // namespace shardtrain::nn
