#include "runtime/nn/llama_block.h"

#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

namespace shardtrain::nn {
namespace {

// t holds at least n elements of `dtype` on `device`: grown (the old
// buffer freed first) where it does not.
void ensure_numel(Tensor& t, int64_t n, DType dtype, Device device) {
  if (t.defined() && t.numel() >= n && t.dtype() == dtype && t.device() == device) return;
  t = Tensor();
  t = Tensor::empty({n}, dtype, device);
}

}  // namespace

void LlamaWorkspace::release() {
  for (Tensor& t : slots) t = Tensor();
  for (Tensor* t : {&g_a, &g_b, &g_qkv, &g_f, &g_2f, &scratch, weight_copy.get()}) *t = Tensor();
  capacity = 0;
}

LlamaBlock::LlamaBlock(std::string name, const LlamaShape& shape, std::shared_ptr<LlamaWorkspace> shared)
    : Block(std::move(name)),
      s_(shape),
      shared_(std::move(shared)),
      norm1_(shape.C, shape.norm_eps),
      norm2_(shape.C, shape.norm_eps),
      qkv_(shape.C, shape.n_head > 0 && shape.C % shape.n_head == 0 ? shape.qkv_width() : 1, false),
      o_(shape.C, shape.C, false),
      gate_up_(shape.C, 2 * shape.ffn_hidden, false),
      down_(shape.ffn_hidden, shape.C, false) {
  ST_CHECK(s_.T > 0, "llama block {}: sequence length must be positive, got {}", this->name(), s_.T);
  ST_CHECK(s_.n_head > 0 && s_.C % s_.n_head == 0, "llama block {}: {} channels do not split into {} heads",
           this->name(), s_.C, s_.n_head);
  ST_CHECK(s_.n_kv_head > 0 && s_.n_head % s_.n_kv_head == 0,
           "llama block {}: {} query heads do not group over {} key/value heads", this->name(), s_.n_head,
           s_.n_kv_head);
  ST_CHECK(s_.head_size() % 2 == 0, "llama block {}: rotary positions need an even head size, got {}", this->name(),
           s_.head_size());
  ST_CHECK(s_.ffn_hidden > 0 && s_.n_layer > 0, "llama block {}: ffn_hidden and n_layer must be positive",
           this->name());
  ST_CHECK(shared_ != nullptr, "llama block {}: no workspace", this->name());
  for (Linear* l : {&qkv_, &o_, &gate_up_, &down_}) l->set_transient_weight_copy(shared_->weight_copy);
}

std::vector<ParamSpec> LlamaBlock::param_specs() const {
  const float proj_std = 0.02f / std::sqrt(2.0f * float(s_.n_layer));
  std::vector<ParamSpec> all;
  auto add = [&](const char* name, const Layer& layer, float weight_std) {
    append_layer_specs(all, name, layer, weight_std);
  };
  add("attn_norm", norm1_, 0.0f);
  add("qkv", qkv_, 0.02f);
  add("o", o_, proj_std);
  add("mlp_norm", norm2_, 0.0f);
  add("gate_up", gate_up_, 0.02f);
  add("down", down_, proj_std);
  return all;
}

void LlamaBlock::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  ST_CHECK(params.size() == 6 && grads.size() == 6, "llama block {}: expected 6 parameter views, got {}", name(),
           params.size());
  Layer* layers[] = {&norm1_, &qkv_, &o_, &norm2_, &gate_up_, &down_};
  for (size_t i = 0; i < 6; ++i) layers[i]->bind(params.subspan(i, 1), grads.subspan(i, 1));
}

Shape LlamaBlock::output_shape(const Shape& in) const {
  ST_CHECK(in == (Shape{s_.T, s_.C}), "llama block {} was built for samples [{}, {}], got {}", name(), s_.T, s_.C,
           in.str());
  return in;
}

bool LlamaBlock::keeps(Recompute mode, LlamaSlot s) {
  switch (mode) {
    case Recompute::none: return true;
    case Recompute::selective: return s == LlamaSlot::qkv || s == LlamaSlot::res1 || s == LlamaSlot::gu;
    case Recompute::full: return false;
  }
  return true;
}

int64_t LlamaBlock::slot_numel(LlamaSlot s) const {
  const int64_t T = s_.T, C = s_.C, F = s_.ffn_hidden;
  switch (s) {
    case LlamaSlot::n1:
    case LlamaSlot::o:
    case LlamaSlot::res1:
    case LlamaSlot::n2: return T * C;
    case LlamaSlot::qkv: return T * s_.qkv_width();
    // The flash kernels' saved state (tiled, cuDNN's): a log-sum-exp per
    // row and head. The materialized kernel's probabilities grow it at the
    // forward that runs it.
    case LlamaSlot::lse: return s_.n_head * T;
    case LlamaSlot::gu: return T * 2 * F;
    case LlamaSlot::h: return T * F;
    case LlamaSlot::count: break;
  }
  return 0;
}

DType LlamaBlock::slot_dtype(LlamaSlot s) const {
  return s == LlamaSlot::lse || s == LlamaSlot::res1 ? DType::f32 : act_;
}

int64_t LlamaBlock::activation_bytes(int64_t batch) const {
  // The slots this Block keeps, its output (the residual stream, f32) and
  // the norms' statistics.
  int64_t bytes = batch * s_.T * s_.C * int64_t(sizeof(float));
  for (size_t i = 0; i < kLlamaSlots; ++i) {
    const auto s = LlamaSlot(i);
    if (keeps(recompute_, s)) bytes += batch * slot_numel(s) * int64_t(dtype_size(slot_dtype(s)));
  }
  return bytes + norm1_.workspace_bytes(Shape{s_.T, s_.C}, batch) + norm2_.workspace_bytes(Shape{s_.T, s_.C}, batch);
}

int64_t LlamaBlock::shared_bytes(int64_t batch) const {
  // The gradient buffers (two f32 along the residual stream; qkv's, the
  // SwiGLU output's and gate_up's in the activation type), the tiled
  // attention's backward scratch (cuDNN's needs none), and the slots this
  // Block recomputes.
  const int64_t N = batch * s_.T, act = int64_t(dtype_size(act_));
  int64_t bytes =
      2 * N * s_.C * int64_t(sizeof(float)) + N * (s_.qkv_width() + 3 * s_.ffn_hidden) * act +
      ops::attention_scratch_floats(ops::AttentionKernel::tiled, plan_device_, batch, s_.T, s_.C, s_.n_head) *
          int64_t(sizeof(float));
  for (size_t i = 0; i < kLlamaSlots; ++i) {
    const auto s = LlamaSlot(i);
    if (!keeps(recompute_, s)) bytes += batch * slot_numel(s) * int64_t(dtype_size(slot_dtype(s)));
  }
  return bytes;
}

int64_t LlamaBlock::widened_bytes(int64_t batch, bool training) const {
  if (act_ != DType::bf16) return 0;
  // In floats per token, the most one op widens (kernels/ops.h runs the f32
  // kernel on copies; the RMSNorms, RoPE and the SwiGLU on buffers of a few
  // rows, which are not counted). Unless the linear ops read and write
  // bf16 as it is: gate_up's forward (its input and output: C + 2F) and
  // qkv's (C + Q), in training gate_up's backward (its input, output
  // gradient and input gradient: 2C + 2F), down's (its input and input
  // gradient: 2F) and qkv's (2C + Q). Past one tile the attention's
  // forward (qkv and the output: Q + C) and backward (qkv, its gradient
  // and the output: 2Q + C).
  const int64_t C = s_.C, F = s_.ffn_hidden, Q = s_.qkv_width();
  int64_t floats = 0;
  if (!ops::cpu_linear_reads_bf16()) {
    floats = std::max(C + 2 * F, C + Q);
    if (training) floats = std::max({floats, 2 * C + 2 * F, 2 * F, 2 * C + Q});
  }
  if (!ops::cpu_attention_reads_bf16(s_.T)) floats = std::max(floats, training ? 2 * Q + C : Q + C);
  return int64_t(sizeof(float)) * batch * s_.T * floats;
}

int64_t LlamaBlock::kept_bf16_bytes(int64_t batch) const {
  const Shape c{s_.T, s_.C}, f{s_.T, s_.ffn_hidden};
  return qkv_.kept_bf16_bytes(c, batch, act_) + o_.kept_bf16_bytes(c, batch, act_) +
         gate_up_.kept_bf16_bytes(c, batch, act_) + down_.kept_bf16_bytes(f, batch, act_);
}

int64_t LlamaBlock::transient_bf16_bytes() const {
  if (act_ != DType::bf16) return 0;
  return std::max({qkv_.transient_bf16_bytes(), o_.transient_bf16_bytes(), gate_up_.transient_bf16_bytes(),
                   down_.transient_bf16_bytes()});
}

Tensor& LlamaBlock::slot(LlamaSlot s) {
  if (keeps(recompute_, s)) return own_[size_t(s)];
  Tensor& t = shared_->slots[size_t(s)];
  if (!t.defined()) t = Tensor::empty({shared_->capacity * slot_numel(s)}, slot_dtype(s), device_);
  return t;
}

Tensor LlamaBlock::view(LlamaSlot s, int64_t width) { return slot(s).view(0, {batch_, s_.T, width}); }

void LlamaBlock::ensure_capacity(int64_t batch, Device device) {
  const bool same_type =
      !out_.defined() || !own_[size_t(LlamaSlot::gu)].defined() || own_[size_t(LlamaSlot::gu)].dtype() == act_;
  if (batch > capacity_ || !(device == device_) || !same_type || allocated_for_ != recompute_) {
    for (Tensor& t : own_) t = Tensor();  // the old buffers first: no overlap with the new ones
    out_ = Tensor();
    capacity_ = std::max(batch, capacity_);
    device_ = device;
    allocated_for_ = recompute_;
    for (size_t i = 0; i < kLlamaSlots; ++i) {
      const auto s = LlamaSlot(i);
      if (keeps(recompute_, s)) own_[i] = Tensor::empty({capacity_ * slot_numel(s)}, slot_dtype(s), device);
    }
    out_ = Tensor::empty({capacity_ * s_.T * s_.C}, DType::f32, device);
  }
  LlamaWorkspace& w = *shared_;
  if (batch > w.capacity || !(device == w.device) || w.act != act_) {
    w.release();
    w.capacity = batch;
    w.device = device;
    w.act = act_;
  }
  if (!w.g_a.defined()) {
    const int64_t N = w.capacity * s_.T;
    w.g_a = Tensor::empty({N * s_.C}, DType::f32, device);
    w.g_b = Tensor::empty({N * s_.C}, DType::f32, device);
    w.g_qkv = Tensor::empty({N * s_.qkv_width()}, act_, device);
    w.g_f = Tensor::empty({N * s_.ffn_hidden}, act_, device);
    w.g_2f = Tensor::empty({N * 2 * s_.ffn_hidden}, act_, device);
  }
  ensure_numel(w.scratch, ops::attention_scratch_floats(attention_, device, w.capacity, s_.T, s_.C, s_.n_head),
               DType::f32, device);
}

void LlamaBlock::release_activations() {
  for (Tensor& t : own_) t = Tensor();
  out_ = Tensor();
  in_ = Tensor();
  shared_->release();
  for (Layer* l : std::initializer_list<Layer*>{&norm1_, &norm2_, &qkv_, &o_, &gate_up_, &down_})
    l->release_activations();
  capacity_ = 0;
}

void LlamaBlock::run_forward(bool products) {
  const int64_t C = s_.C, F = s_.ffn_hidden, H = s_.n_head, KV = s_.n_kv_head, hs = s_.head_size();
  const Tensor n1 = view(LlamaSlot::n1, C), qkv = view(LlamaSlot::qkv, s_.qkv_width());
  const Tensor o = view(LlamaSlot::o, C), res1 = view(LlamaSlot::res1, C), n2 = view(LlamaSlot::n2, C);
  const Tensor gu = view(LlamaSlot::gu, 2 * F), h = view(LlamaSlot::h, F);
  norm1_.forward(in_, n1);
  if (products) {
    qkv_.forward(n1, qkv);
    ops::rope_forward(qkv, H + KV, hs, s_.rope_theta);  // the query and key heads, in place
  }
  const int64_t saved = ops::attention_saved_floats(attention_, capacity_, s_.T, C, H, act_, KV);
  Tensor& lse = slot(LlamaSlot::lse);
  if (lse.numel() < saved) ensure_numel(lse, saved, DType::f32, device_);
  ops::attention_forward(o, lse, qkv, H, attention_, KV);
  if (products) {
    o_.forward(o, res1);
    norm2_.forward_residual(res1, in_, res1, n2);  // res1 += x, then the norm: one pass
    gate_up_.forward(n2, gu);
  } else {
    norm2_.forward(res1, n2);  // the bits of forward_residual's norm
  }
  ops::swiglu_forward(h, gu);
}

Tensor LlamaBlock::forward(const Tensor& in) {
  batch_ = in.dim(0);
  attention_ = ops::attention_kernel(in.device(), batch_, s_.T, s_.C, s_.n_head, s_.n_kv_head);
  ensure_capacity(batch_, in.device());
  in_ = in.reshape({batch_, s_.T, s_.C});
  run_forward(true);
  Tensor out = out_.view(0, {batch_, s_.T, s_.C});
  down_.forward(view(LlamaSlot::h, s_.ffn_hidden), out);
  ops::add(out, out, view(LlamaSlot::res1, s_.C));  // residual 2
  return out;
}

void LlamaBlock::backward(const Tensor& dout_in, const Tensor& din, bool accumulate) {
  // What the forward did not keep, computed again from what it did; the
  // down projection's output is not needed (its gradient is dout).
  if (recompute_ != Recompute::none) run_forward(recompute_ == Recompute::full);
  const int64_t B = batch_, T = s_.T, C = s_.C, F = s_.ffn_hidden, Q = s_.qkv_width();
  LlamaWorkspace& w = *shared_;
  const Tensor dout = dout_in.reshape({B, T, C});
  const Tensor ga = w.g_a.view(0, {B, T, C}), gb = w.g_b.view(0, {B, T, C});
  const Tensor gqkv = w.g_qkv.view(0, {B, T, Q}), gf = w.g_f.view(0, {B, T, F}), g2f = w.g_2f.view(0, {B, T, 2 * F});
  // MLP branch: dout flows into down and, unchanged, along the residual.
  down_.backward(dout, gf, accumulate);
  ops::swiglu_backward(g2f, gf, view(LlamaSlot::gu, 2 * F));
  gate_up_.backward(g2f, ga, accumulate);
  // gb = d res1: mlp_norm's input gradient plus dout along the residual.
  norm2_.backward_residual(ga, dout, gb, accumulate);
  // Attention branch.
  o_.backward(gb, ga, accumulate);
  ops::attention_backward(gqkv, w.scratch, ga, view(LlamaSlot::qkv, Q), view(LlamaSlot::o, C), slot(LlamaSlot::lse),
                          s_.n_head, attention_, s_.n_kv_head);
  ops::rope_backward(gqkv, s_.n_head + s_.n_kv_head, s_.head_size(), s_.rope_theta);
  qkv_.backward(gqkv, ga, accumulate);
  // din = attn_norm's input gradient plus gb along residual 1. Without din
  // attn_norm's input gradient goes to gb, free then.
  if (din.defined()) {
    norm1_.backward_residual(ga, gb, din.reshape({B, T, C}), accumulate);
  } else {
    norm1_.backward(ga, gb, accumulate);
  }
}

std::string LlamaBlock::describe() const {
  std::string kv = s_.n_kv_head == s_.n_head ? "" : fmt::format(" over {} kv heads", s_.n_kv_head);
  std::string rc = recompute_ == Recompute::none ? "" : fmt::format(", recompute {}", recompute_);
  return fmt::format("llama [{}, {}] {} heads{}: rmsnorm, rope causal attention, rmsnorm, swiglu {}->{}->{}{}", s_.T,
                     s_.C, s_.n_head, kv, s_.C, s_.ffn_hidden, s_.C, rc);
}

}  // namespace shardtrain::nn
