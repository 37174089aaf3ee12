#include "runtime/nn/embedding.h"

#include "kernels/ops.h"

namespace shardtrain::nn {

Embedding::Embedding(int64_t vocab, int64_t max_positions, int64_t channels)
    : vocab_(vocab), max_positions_(max_positions), channels_(channels) {
  ST_CHECK(vocab > 0 && max_positions >= 0 && channels > 0,
           "embedding needs positive sizes, got vocab {}, positions {}, width {}", vocab, max_positions, channels);
}

std::vector<ParamSpec> Embedding::param_specs() const {
  std::vector<ParamSpec> specs{{"wte", {vocab_, channels_}, Init::normal, 1, 0.02f, true}};
  if (max_positions_ > 0) specs.push_back({"wpe", {max_positions_, channels_}, Init::normal, 1, 0.02f, true});
  return specs;
}

void Embedding::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  wte_ = params[0];
  dwte_ = grads[0];
  if (tied_) *tied_ = {wte_, dwte_};
  if (max_positions_ > 0) {
    wpe_ = params[1];
    dwpe_ = grads[1];
  }
}

Shape Embedding::output_shape(const Shape& in) const {
  ST_CHECK(in.ndim() == 1 && (max_positions_ == 0 || in[0] <= max_positions_),
           "embedding takes sequences of at most {} token ids, got samples of shape {}", max_positions_, in.str());
  return Shape{in[0], channels_};
}

void Embedding::forward(const Tensor& in, const Tensor& out) {
  ST_CHECK(in.dtype() == DType::i32, "embedding input must be i32 token ids, got {}", dtype_name(in.dtype()));
  ids_ = in.reshape({in.dim(0), in.numel() / in.dim(0)});
  if (max_positions_ == 0) {
    ops::token_embedding_forward(out, ids_, wte_);
  } else {
    ops::token_position_embedding_forward(out, ids_, wte_, wpe_);
  }
}

void Embedding::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  ST_CHECK(!din.defined(), "embedding: token ids have no gradient");
  if (tied_) accumulate = true;  // onto the head's gradient of the same weight, written before
  if (max_positions_ == 0) {
    ops::token_embedding_backward(dwte_, dout, ids_, accumulate);
  } else {
    ops::token_position_embedding_backward(dwte_, dwpe_, dout, ids_, accumulate);
  }
}

}  // namespace shardtrain::nn
