// A GPT-2 style transformer Block on samples [T, C]:
//   x = x + proj(attention(qkv(ln1(x))))      causal, n_head heads
//   x = x + fc_proj(gelu(fc(ln2(x))))         fc: C -> 4C, fc_proj: 4C -> C
// Its 12 parameters (ln1, qkv, proj, ln2, fc, fc_proj; weight then bias each)
// are one Block, so one contiguous range of the flat buffer. Linear weights
// are N(0, 0.02^2), the two residual projections N(0, (0.02/sqrt(2 n_layer))^2)
// as in GPT-2; biases 0; LayerNorm gains 1.
//
// Under mixed precision (set_activation_dtype(bf16)) the activations that
// feed a GEMM or the attention are bf16 (ln1, qkv, the attention output,
// ln2, the GELU's input and output) and so are the gradients of qkv and of
// the GELU's input; the residual stream x and the gradients along it stay
// f32, as in PyTorch's autocast.
#pragma once

#include "kernels/ops.h"
#include "runtime/nn/block.h"
#include "runtime/nn/layernorm.h"
#include "runtime/nn/linear.h"

namespace shardtrain::nn {

class TransformerBlock final : public Block {
 public:
  TransformerBlock(std::string name, int64_t seq_len, int64_t channels, int64_t n_head, int64_t n_layer = 1);

  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  Shape output_shape(const Shape& in) const override;
  int64_t activation_bytes(int64_t batch) const override;
  int64_t widened_bytes(int64_t batch, bool training) const override;
  int64_t kept_bf16_bytes(int64_t batch) const override;
  Tensor forward(const Tensor& in) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override;
  void set_activation_dtype(DType dtype) override { act_ = dtype; }
  void set_plan_device(Device device) override { plan_device_ = device; }
  std::string describe() const override;

 private:
  void ensure_capacity(int64_t batch, Device device);

  int64_t T_, C_, n_head_, n_layer_;
  LayerNorm ln1_, ln2_;
  Linear qkv_, proj_, fc_, fc_proj_;
  // Activations, capacity_ samples each.
  Tensor ln1_out_, qkv_out_, att_, attn_out_, res1_, ln2_out_, fc_out_, gelu_out_, out_;
  // Gradient workspaces.
  Tensor g_a_, g_b_, g_3c_, g_4c_, scratch_;
  int64_t capacity_ = 0, batch_ = 0;
  DType act_ = DType::f32;  // of the activations above but in_, res1_, out_ (f32 always)
  // The attention kernel the last forward ran (its backward runs the same);
  // att_ holds what that kernel saves, sized when the forward picks it.
  ops::AttentionKernel attention_ = ops::AttentionKernel::materialized;
  Device device_;  // where the buffers live: the device of the input
  Device plan_device_ = Device::cpu();
  Tensor in_;
};

}  // namespace shardtrain::nn
