// Fully connected layer over the last dimension: [..., in] -> [..., out].
// A multi-dimensional sample (an image) is flattened: in = its numel.
#pragma once

#include "runtime/nn/layer.h"

#include <memory>

namespace shardtrain::nn {

class Linear final : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  std::string kind() const override { return "linear"; }
  bool takes_bf16() const override { return true; }
  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  Shape output_shape(const Shape& in) const override;
  int64_t kept_bf16_bytes(const Shape& in, int64_t batch, DType in_dtype) const override;
  void forward(const Tensor& in, const Tensor& out) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  // This layer and a GELU after it: pre = this layer's output, out =
  // gelu(pre), in one GEMM where the GPU's cuBLASLt can (ops.h).
  void forward_gelu(const Tensor& in, const Tensor& pre, const Tensor& out);
  // backward() of a layer whose input was gelu(pre): dpre is the gradient
  // with respect to pre (the GELU's backward folded into this one).
  void backward_through_gelu(const Tensor& dout, const Tensor& dpre, const Tensor& pre, bool accumulate);
  // Where the products take bf16 operands and the input is bf16 (nothing of it to
  // keep), make the weight's bf16 copy in `buffer` for the forward and
  // again for the backward instead of keeping it in between: one more
  // conversion of the weight per step, and a model holds one layer's copy
  // instead of a bf16 copy of every weight (a Llama's Linears share one
  // buffer, grown to the largest layer once, so a captured step allocates
  // nothing; the copies are the same bits, so the results are too).
  void set_transient_weight_copy(std::shared_ptr<Tensor> buffer) { transient_ = std::move(buffer); }
  // The weight is another layer's parameter (tied embeddings: the token
  // embedding's [V, C] as a head's [OC, IC]): this layer declares none and
  // reads the views `tied` holds at each forward and backward. No bias.
  void use_tied_weight(std::shared_ptr<TiedWeight> tied);
  // Bytes of that transient copy (kept_bf16_bytes counts it no more).
  int64_t transient_bf16_bytes() const { return int64_t(dtype_size(DType::bf16)) * in_features_ * out_features_; }
  void release_activations() override {
    in_ = Tensor();
    bf16_ = Tensor();
    weight_copied_ = nullptr;
  }

 private:
  int64_t in_features_, out_features_;
  bool has_bias_;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor in_;  // forward input, kept for backward
  // Where the products take bf16 operands (ops::linear_keeps_bf16): the
  // forward's bf16 copies of the input and weight, which the backward
  // reuses (ops::linear_forward's `keep`).
  Tensor bf16_;
  bool kept_ = false;                  // the last forward filled bf16_
  std::shared_ptr<Tensor> transient_;  // set_transient_weight_copy's buffer
  std::shared_ptr<TiedWeight> tied_;   // use_tied_weight's
  void take_tied_weight();
  // Whether this forward or backward makes the weight's copy in transient_.
  bool transient(const Tensor& in) const { return transient_ != nullptr && in.dtype() == DType::bf16; }
  // transient_ grown to this layer's copy on in's device.
  const Tensor& transient_buffer(const Tensor& in);
  // The backward of a transient copy: the weight converted again into
  // transient_ before the backward `op` runs.
  template <typename Op>
  void run_backward(Op&& op);
  // The weight whose bf16 copy bf16_ holds (null: none).
  const void* weight_copied_ = nullptr;

  // A forward through `op`(keep, keep_has_weight): in_, and bf16_ sized
  // where it is kept (`keep` undefined where nothing is), its weight copy
  // reused where nn::SameWeights says the weight has not changed.
  template <typename Op>
  void run_forward(const Tensor& in, Op&& op);
};

}  // namespace shardtrain::nn
