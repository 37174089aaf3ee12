#include "runtime/nn/transformer.h"

#include "kernels/ops.h"

#include <cmath>

namespace shardtrain::nn {

TransformerBlock::TransformerBlock(std::string name, int64_t seq_len, int64_t channels, int64_t n_head, int64_t n_layer)
    : Block(std::move(name)),
      T_(seq_len),
      C_(channels),
      n_head_(n_head),
      n_layer_(n_layer),
      ln1_(channels),
      ln2_(channels),
      qkv_(channels, 3 * channels),
      proj_(channels, channels),
      fc_(channels, 4 * channels),
      fc_proj_(4 * channels, channels) {
  ST_CHECK(seq_len > 0, "transformer block {}: sequence length must be positive, got {}", this->name(), seq_len);
  ST_CHECK(n_head > 0 && channels % n_head == 0, "transformer block {}: {} channels do not split into {} heads",
           this->name(), channels, n_head);
  ST_CHECK(n_layer > 0, "transformer block {}: n_layer must be positive", this->name());
}

std::vector<ParamSpec> TransformerBlock::param_specs() const {
  const float proj_std = 0.02f / std::sqrt(2.0f * float(n_layer_));
  std::vector<ParamSpec> all;
  auto add = [&](const char* name, const Layer& layer, float weight_std) {
    append_layer_specs(all, name, layer, weight_std);
  };
  add("ln1", ln1_, 0.0f);
  add("qkv", qkv_, 0.02f);
  add("proj", proj_, proj_std);
  add("ln2", ln2_, 0.0f);
  add("fc", fc_, 0.02f);
  add("fc_proj", fc_proj_, proj_std);
  return all;
}

void TransformerBlock::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  ST_CHECK(params.size() == 12 && grads.size() == 12, "transformer block {}: expected 12 parameter views, got {}",
           name(), params.size());
  Layer* layers[] = {&ln1_, &qkv_, &proj_, &ln2_, &fc_, &fc_proj_};
  for (size_t i = 0; i < 6; ++i) layers[i]->bind(params.subspan(2 * i, 2), grads.subspan(2 * i, 2));
}

Shape TransformerBlock::output_shape(const Shape& in) const {
  ST_CHECK(in == (Shape{T_, C_}), "transformer block {} was built for samples [{}, {}], got {}", name(), T_, C_,
           in.str());
  return in;
}

int64_t TransformerBlock::activation_bytes(int64_t batch) const {
  // ensure_capacity's buffers: per token 4 C f32 values (the residual stream
  // and its gradients) and 21 C of the activation type, the attention's
  // saved state and its backward's scratch; then the two LayerNorms'
  // statistics. The tiled kernel's state (a log-sum-exp per row), the CPU's
  // and a GPU's but with runtime.gpu_attention = "materialized", whose
  // probabilities are not counted; cuDNN's (where it runs) keeps the same
  // rows, and copies of Q, K, V and O where they are f32.
  const int64_t N = batch * T_;
  const ops::AttentionKernel kernel = ops::AttentionKernel::tiled;
  const int64_t f32_values = 4 * N * C_ + ops::attention_saved_floats(kernel, batch, T_, C_, n_head_) +
                             ops::attention_scratch_floats(kernel, plan_device_, batch, T_, C_, n_head_);
  return 4 * f32_values + int64_t(dtype_size(act_)) * 21 * N * C_ + ln1_.workspace_bytes(Shape{T_, C_}, batch) +
         ln2_.workspace_bytes(Shape{T_, C_}, batch);
}

int64_t TransformerBlock::widened_bytes(int64_t batch, bool training) const {
  if (act_ != DType::bf16) return 0;
  const int64_t floats_per_c = [&]() -> int64_t {
    // In C-wide floats per token, the most one op widens (the LayerNorms
    // write bf16 through buffers of a few rows). Where the linear ops read
    // and write bf16 as it is, only the attention past one tile: qkv and
    // its output (3 + 1), backward also their gradients (3 + 3 + 1 + 1).
    if (ops::cpu_linear_reads_bf16()) return ops::cpu_attention_reads_bf16(T_) ? 0 : (training ? 8 : 4);
    // Otherwise fc's forward (its input, the GELU's input and output:
    // 1 + 4 + 4) and fc_proj's backward through the GELU (its input, the
    // GELU's input and its gradient: 4 + 4 + 4).
    return training ? 12 : 9;
  }();
  return int64_t(sizeof(float)) * batch * T_ * C_ * floats_per_c;
}

int64_t TransformerBlock::kept_bf16_bytes(int64_t batch) const {
  const Shape c{T_, C_}, c4{T_, 4 * C_};  // the linear layers' inputs: ln1, attention, ln2, GELU
  return qkv_.kept_bf16_bytes(c, batch, act_) + proj_.kept_bf16_bytes(c, batch, act_) +
         fc_.kept_bf16_bytes(c, batch, act_) + fc_proj_.kept_bf16_bytes(c4, batch, act_);
}

void TransformerBlock::ensure_capacity(int64_t batch, Device device) {
  if (batch <= capacity_ && device == device_ && ln1_out_.dtype() == act_) return;
  release_activations();  // the old buffers first: no overlap with the new ones
  capacity_ = batch;
  device_ = device;
  const int64_t N = batch * T_;
  ln1_out_ = Tensor::empty({N * C_}, act_, device);
  qkv_out_ = Tensor::empty({N * 3 * C_}, act_, device);
  attn_out_ = Tensor::empty({N * C_}, act_, device);
  res1_ = Tensor::empty({N * C_}, DType::f32, device);
  ln2_out_ = Tensor::empty({N * C_}, act_, device);
  fc_out_ = Tensor::empty({N * 4 * C_}, act_, device);
  gelu_out_ = Tensor::empty({N * 4 * C_}, act_, device);
  out_ = Tensor::empty({N * C_}, DType::f32, device);
  g_a_ = Tensor::empty({N * C_}, DType::f32, device);
  g_b_ = Tensor::empty({N * C_}, DType::f32, device);
  g_3c_ = Tensor::empty({N * 3 * C_}, act_, device);
  g_4c_ = Tensor::empty({N * 4 * C_}, act_, device);
  scratch_ = Tensor::empty({ops::attention_scratch_floats(ops::attention_kernel(device, batch, T_, C_, n_head_), device,
                                                          batch, T_, C_, n_head_)},
                           DType::f32, device);
}

void TransformerBlock::release_activations() {
  for (Tensor* t : {&ln1_out_, &qkv_out_, &att_, &attn_out_, &res1_, &ln2_out_, &fc_out_, &gelu_out_, &out_, &g_a_,
                    &g_b_, &g_3c_, &g_4c_, &scratch_, &in_})
    *t = Tensor();
  // The layers' own references (their inputs, the linear layers' bf16 copies).
  for (Layer* l : std::initializer_list<Layer*>{&ln1_, &ln2_, &qkv_, &proj_, &fc_, &fc_proj_}) l->release_activations();
  capacity_ = 0;
}

Tensor TransformerBlock::forward(const Tensor& in) {
  batch_ = in.dim(0);
  ensure_capacity(batch_, in.device());
  const int64_t B = batch_, T = T_, C = C_;
  in_ = in.reshape({B, T, C});
  const Tensor ln1 = ln1_out_.view(0, {B, T, C}), qkv = qkv_out_.view(0, {B, T, 3 * C});
  const Tensor attn = attn_out_.view(0, {B, T, C}), res1 = res1_.view(0, {B, T, C});
  const Tensor ln2 = ln2_out_.view(0, {B, T, C}), fc = fc_out_.view(0, {B, T, 4 * C});
  const Tensor gelu = gelu_out_.view(0, {B, T, 4 * C});
  Tensor out = out_.view(0, {B, T, C});
  ln1_.forward(in_, ln1);
  qkv_.forward(ln1, qkv);
  attention_ = ops::attention_kernel(in.device(), B, T, C, n_head_);
  const int64_t saved = ops::attention_saved_floats(attention_, capacity_, T, C, n_head_, act_);
  if (att_.numel() < saved) {
    att_ = Tensor();  // the old buffer first: no overlap with the new one
    att_ = Tensor::empty({saved}, DType::f32, device_);
  }
  ops::attention_forward(attn, att_, qkv, n_head_, attention_);
  proj_.forward(attn, res1);
  // Residual 1 and ln2 in one pass over the rows: res1 = res1 + x, then ln2.
  ln2_.forward_residual(res1, in_, res1, ln2);
  fc_.forward_gelu(ln2, fc, gelu);  // fc keeps the GELU's input, gelu its output
  fc_proj_.forward(gelu, out);
  ops::add(out, out, res1);  // residual 2
  return out;
}

void TransformerBlock::backward(const Tensor& dout_in, const Tensor& din, bool accumulate) {
  const int64_t B = batch_, T = T_, C = C_;
  const Tensor dout = dout_in.reshape({B, T, C});
  const Tensor ga = g_a_.view(0, {B, T, C}), gb = g_b_.view(0, {B, T, C});
  const Tensor g3 = g_3c_.view(0, {B, T, 3 * C}), g4 = g_4c_.view(0, {B, T, 4 * C});
  // MLP branch: dout flows into fc_proj and, unchanged, along the residual.
  // g4 = the gradient at the GELU's input, through fc_proj and the GELU.
  fc_proj_.backward_through_gelu(dout, g4, fc_out_.view(0, {B, T, 4 * C}), accumulate);
  fc_.backward(g4, ga, accumulate);
  // gb = d res1: ln2's input gradient plus dout along the residual, one pass.
  ln2_.backward_residual(ga, dout, gb, accumulate);
  // Attention branch.
  proj_.backward(gb, ga, accumulate);
  ops::attention_backward(g3, scratch_, ga, qkv_out_.view(0, {B, T, 3 * C}), attn_out_.view(0, {B, T, C}), att_,
                          n_head_, attention_);
  qkv_.backward(g3, ga, accumulate);
  // din = ln1's input gradient plus gb along residual 1, in one pass. Without
  // din (the caller needs none) ln1's input gradient goes to gb, free then:
  // its parameter gradients are still wanted.
  if (din.defined()) {
    ln1_.backward_residual(ga, gb, din.reshape({B, T, C}), accumulate);
  } else {
    ln1_.backward(ga, gb, accumulate);
  }
}

std::string TransformerBlock::describe() const {
  return fmt::format("transformer [{}, {}] {} heads: ln, causal attention, ln, mlp {}->{}->{}", T_, C_, n_head_, C_,
                     4 * C_, C_);
}

}  // namespace shardtrain::nn
