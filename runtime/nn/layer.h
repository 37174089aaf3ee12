// A layer: parameters it declares, and an explicit forward and backward (no
// autograd tape; the order is known, as in llm.c). Shapes carry the batch as
// their first extent; output_shape() works on one sample's shape.
//
// forward() may keep views of its input and output for backward(): the block
// that owns the layer keeps those buffers alive and unchanged until backward.
#pragma once

#include "runtime/core/tensor.h"
#include "runtime/nn/param.h"

#include <span>
#include <string>
#include <vector>

namespace shardtrain::nn {

class Layer {
 public:
  virtual ~Layer() = default;

  virtual std::string kind() const = 0;
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  // Views of this layer's parameters and gradients, in param_specs() order.
  virtual void bind(std::span<const Tensor> /*params*/, std::span<const Tensor> /*grads*/) {}

  // One sample's output shape for one sample's input shape; an Error if the
  // input shape does not fit the layer.
  virtual Shape output_shape(const Shape& in) const = 0;

  // out: [B, output_shape(in sample)], allocated by the caller.
  virtual void forward(const Tensor& in, const Tensor& out) = 0;
  // din undefined: the input gradient is not needed (first layer of a model).
  virtual void backward(const Tensor& dout, const Tensor& din, bool accumulate) = 0;
  // True where forward and backward take bf16 activations (kernels/ops.h)
  // as well as f32: a SequentialBlock of such layers only keeps its
  // outputs in bf16 under mixed precision.
  virtual bool takes_bf16() const { return false; }
  // Drops what forward kept for backward and buffers grown with the batch
  // (Model::forward calls it before a larger batch than any before, so that
  // the old buffers are gone before the new ones are allocated).
  virtual void release_activations() {}

  // Bytes of the buffers the layer itself allocates for `batch` samples of
  // shape `in` (im2col, normalization statistics, argmax): what
  // `shardtrain plan` counts; tests/unit/nn_memory_test.cpp checks it
  // against the allocator.
  virtual int64_t workspace_bytes(const Shape& /*in*/, int64_t /*batch*/) const { return 0; }
  // Where the products take bf16 operands (ops::linear_keeps_bf16): the bf16 copies the layer keeps from its
  // forward for its backward (a linear layer's input, unless `in` is bf16
  // already, and its weight; ops::linear_forward's `keep`).
  virtual int64_t kept_bf16_bytes(const Shape& /*in*/, int64_t /*batch*/, DType /*in_dtype*/) const { return 0; }
};

}  // namespace shardtrain::nn
