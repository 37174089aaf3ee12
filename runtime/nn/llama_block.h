// A Llama Block on samples [T, C]:
//   x = x + o(attention(rope(qkv(rmsnorm1(x)))))     causal, grouped-query
//   x = x + down(silu(gate(rmsnorm2(x))) * up(rmsnorm2(x)))
// qkv is one projection to H query heads and KV key and value heads of
// hs = C / H channels; gate and up are one projection to 2F (gate first).
// No biases. Its 6 parameters (attn_norm, qkv, o, mlp_norm, gate_up, down)
// are one Block, so one contiguous range of the flat buffer. Linear
// weights are N(0, 0.02^2), the two residual projections (o, down)
// N(0, (0.02/sqrt(2 n_layer))^2) as in GPT-2; norm gains 1.
//
// Under mixed precision (set_activation_dtype(bf16)) every activation
// between the layers is bf16, as are the gradients of qkv, gate_up and the
// SwiGLU's output; the residual stream, its gradients, the norms'
// statistics and the attention's log-sum-exp stay f32.
//
// Activation checkpointing (set_recompute, recompute.h): what the Block
// does not keep lives in a LlamaWorkspace its model's Llama Blocks share,
// with the gradient buffers of a backward, which one Block uses at a time.
#pragma once

#include "kernels/ops.h"
#include "runtime/nn/block.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/recompute.h"
#include "runtime/nn/rmsnorm.h"

#include <array>
#include <memory>

namespace shardtrain::nn {

struct LlamaShape {
  int64_t T = 0, C = 0;  // sequence length, channels
  int64_t n_head = 0, n_kv_head = 0;
  int64_t ffn_hidden = 0;  // F, SwiGLU's inner width
  int64_t n_layer = 1;     // for the residual projections' init
  float rope_theta = 10000.0f, norm_eps = 1e-5f;
  int64_t head_size() const { return C / n_head; }
  int64_t qkv_width() const { return (n_head + 2 * n_kv_head) * head_size(); }
};

// The activations a Llama Block may keep, one buffer per slot.
enum class LlamaSlot { n1, qkv, o, lse, res1, n2, gu, h, count };
inline constexpr size_t kLlamaSlots = size_t(LlamaSlot::count);

// What the Llama Blocks of one model share: the slots a checkpointed Block
// recomputes, and the gradient buffers of a backward. Each grows to the
// largest batch asked for.
struct LlamaWorkspace {
  std::array<Tensor, kLlamaSlots> slots;
  Tensor g_a, g_b, g_qkv, g_f, g_2f, scratch;
  // The Linears' transient bf16 weight copies (Linear::set_transient_weight_copy).
  std::shared_ptr<Tensor> weight_copy = std::make_shared<Tensor>();
  int64_t capacity = 0;
  Device device;
  DType act = DType::f32;
  void release();
};

class LlamaBlock final : public Block {
 public:
  LlamaBlock(std::string name, const LlamaShape& shape, std::shared_ptr<LlamaWorkspace> shared);

  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  Shape output_shape(const Shape& in) const override;
  int64_t activation_bytes(int64_t batch) const override;
  int64_t shared_bytes(int64_t batch) const override;
  int64_t widened_bytes(int64_t batch, bool training) const override;
  int64_t kept_bf16_bytes(int64_t batch) const override;
  int64_t transient_bf16_bytes() const override;
  Tensor forward(const Tensor& in) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override;
  void set_activation_dtype(DType dtype) override { act_ = dtype; }
  bool can_recompute() const override { return true; }
  void set_recompute(Recompute mode) override { recompute_ = mode; }
  void set_plan_device(Device device) override { plan_device_ = device; }
  std::string describe() const override;

 private:
  // Whether `mode` keeps slot s in the Block (else it is the workspace's).
  static bool keeps(Recompute mode, LlamaSlot s);
  // Elements of slot s per sample, and its type.
  int64_t slot_numel(LlamaSlot s) const;
  DType slot_dtype(LlamaSlot s) const;
  Tensor& slot(LlamaSlot s);
  // [B, T, width] view of slot s.
  Tensor view(LlamaSlot s, int64_t width);
  void ensure_capacity(int64_t batch, Device device);
  // The forward from in_ into the slots and out_; with `products` false,
  // only what selective recomputation recomputes (the matrix products'
  // outputs are kept).
  void run_forward(bool products);

  LlamaShape s_;
  std::shared_ptr<LlamaWorkspace> shared_;
  RmsNorm norm1_, norm2_;
  Linear qkv_, o_, gate_up_, down_;
  std::array<Tensor, kLlamaSlots> own_;
  Tensor out_, in_;
  int64_t capacity_ = 0, batch_ = 0;
  Device device_;
  Device plan_device_ = Device::cpu();
  DType act_ = DType::f32;  // of the slots but lse and res1 (f32 always)
  Recompute recompute_ = Recompute::none;
  Recompute allocated_for_ = Recompute::none;  // the mode own_ was sized for
  ops::AttentionKernel attention_ = ops::AttentionKernel::tiled;
};

}  // namespace shardtrain::nn
