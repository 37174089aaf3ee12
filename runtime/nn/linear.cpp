#include "runtime/nn/linear.h"

#include "kernels/ops.h"
#include "runtime/nn/same_weights.h"

namespace shardtrain::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features_(in_features), out_features_(out_features), has_bias_(bias) {
  ST_CHECK(in_features > 0 && out_features > 0, "linear layer needs positive sizes, got {} -> {}", in_features,
           out_features);
}

void Linear::use_tied_weight(std::shared_ptr<TiedWeight> tied) {
  ST_CHECK(!has_bias_, "a linear layer with a tied weight has no bias");
  tied_ = std::move(tied);
}

void Linear::take_tied_weight() {
  if (!tied_) return;
  ST_CHECK(tied_->weight.defined() && tied_->weight.numel() == in_features_ * out_features_,
           "linear layer: its tied weight is not bound (or not [{}, {}])", out_features_, in_features_);
  weight_ = tied_->weight;
  dweight_ = tied_->grad;
}

std::vector<ParamSpec> Linear::param_specs() const {
  if (tied_) return {};
  std::vector<ParamSpec> specs{
      {"weight", {out_features_, in_features_}, Init::fan_in_uniform, in_features_, 0.0f, true}};
  if (has_bias_) specs.push_back({"bias", {out_features_}, Init::fan_in_uniform, in_features_, 0.0f, false});
  return specs;
}

void Linear::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  if (tied_) return;
  weight_ = params[0];
  dweight_ = grads[0];
  if (has_bias_) {
    bias_ = params[1];
    dbias_ = grads[1];
  }
}

Shape Linear::output_shape(const Shape& in) const {
  // A sample [in] or [..., in] keeps its leading extents; an image sample
  // [C, H, W] whose numel is in_features is flattened.
  if (in.cols() == in_features_) {
    Shape out = in;
    out[-1] = out_features_;
    return out;
  }
  ST_CHECK(in.numel() == in_features_, "linear layer expects {} input features, got a sample of shape {}", in_features_,
           in.str());
  return Shape{out_features_};
}

int64_t Linear::kept_bf16_bytes(const Shape& in, int64_t batch, DType in_dtype) const {
  if (transient_ != nullptr && in_dtype == DType::bf16) return 0;
  const int64_t rows = batch * in.numel() / in_features_;
  return int64_t(dtype_size(DType::bf16)) * ops::linear_kept_elements(rows, in_features_, out_features_, in_dtype);
}

const Tensor& Linear::transient_buffer(const Tensor& in) {
  const int64_t need = ops::linear_kept_elements(in.numel() / in_features_, in_features_, out_features_, DType::bf16);
  Tensor& b = *transient_;
  if (b.numel() < need || b.device() != in.device()) {
    b = Tensor();  // the old buffer first: no overlap with the new one
    b = Tensor::empty({need}, DType::bf16, in.device());
  }
  return b;
}

template <typename Op>
void Linear::run_forward(const Tensor& in, Op&& op) {
  take_tied_weight();
  in_ = in;
  kept_ = ops::linear_keeps_bf16(in.device());
  if (!kept_) {
    weight_copied_ = nullptr;
    op(Tensor(), false);
    return;
  }
  if (transient(in)) {
    bf16_ = Tensor();
    weight_copied_ = nullptr;  // the shared buffer holds other layers' copies between uses
    op(transient_buffer(in), false);
    return;
  }
  const int64_t need = ops::linear_kept_elements(in.numel() / in_features_, in_features_, out_features_, in.dtype());
  if (bf16_.numel() < need || bf16_.device() != in.device()) {
    bf16_ = Tensor();  // the old buffer first: no overlap with the new one
    bf16_ = Tensor::empty({need}, DType::bf16, in.device());
    weight_copied_ = nullptr;
  }
  const bool reuse = weight_copied_ == weight_.raw() && SameWeights::active();
  weight_copied_ = nullptr;  // until the forward has made it
  op(bf16_, reuse);
  // An empty batch returns before any conversion: no copy was made.
  weight_copied_ = in.numel() > 0 ? weight_.raw() : nullptr;
}

template <typename Op>
void Linear::run_backward(Op&& op) {
  take_tied_weight();
  if (!kept_ || !transient(in_)) {
    op(kept_ ? bf16_ : Tensor());
    return;
  }
  // The forward's copy again: the weight first in the kept buffer
  // (kernels/cuda/linear.h), rounded as the forward rounded it.
  const Tensor& b = transient_buffer(in_);
  ops::convert(b.view(0, {out_features_ * in_features_}), weight_.reshape({out_features_ * in_features_}));
  op(b);
}

void Linear::forward(const Tensor& in, const Tensor& out) {
  run_forward(
      in, [&](const Tensor& keep, bool has_weight) { ops::linear_forward(out, in, weight_, bias_, keep, has_weight); });
}

void Linear::forward_gelu(const Tensor& in, const Tensor& pre, const Tensor& out) {
  run_forward(in, [&](const Tensor& keep, bool has_weight) {
    ops::linear_gelu_forward(out, pre, in, weight_, bias_, keep, has_weight);
  });
}

void Linear::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  run_backward(
      [&](const Tensor& kept) { ops::linear_backward(din, dweight_, dbias_, dout, in_, weight_, accumulate, kept); });
}

void Linear::backward_through_gelu(const Tensor& dout, const Tensor& dpre, const Tensor& pre, bool accumulate) {
  run_backward([&](const Tensor& kept) {
    ops::linear_backward_through_gelu(dpre, dweight_, dbias_, dout, in_, weight_, pre, accumulate, kept);
  });
}

}  // namespace shardtrain::nn
