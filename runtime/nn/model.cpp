#include "runtime/nn/model.h"

#include "runtime/nn/emulated_block.h"

#include "runtime/telemetry/recorder.h"

#include <algorithm>

namespace shardtrain::nn {
Model::Model(std::vector<std::unique_ptr<Block>> blocks, Shape input_sample, bool layout_only)
    : blocks_(std::move(blocks)) {
  ST_CHECK(!blocks_.empty(), "a model needs at least one block");
  shapes_.push_back(input_sample);
  std::vector<std::string> names;
  std::vector<std::vector<ParamSpec>> specs;
  for (auto& b : blocks_) {
    shapes_.push_back(b->output_shape(shapes_.back()));
    // Checkpoints and the strategies' records name parameters by Block.
    ST_CHECK(std::find(names.begin(), names.end(), b->name()) == names.end(), "two Blocks are named \"{}\"", b->name());
    names.push_back(b->name());
    specs.push_back(b->param_specs());
  }
  flat_ = FlatParameters(names, specs, !layout_only);
  if (layout_only) return;
  for (int i = 0; i < num_blocks(); ++i) blocks_[size_t(i)]->bind(flat_.param_views(i), flat_.grad_views(i));
}

void Model::to(Device device) {
  if (device_ == device) return;
  ST_CHECK(flat_.has_buffers(), "Model::to after the flat buffers were released (FSDP): move the model first");
  flat_.to(device);
  device_ = device;
  for (int i = 0; i < num_blocks(); ++i) blocks_[size_t(i)]->bind(flat_.param_views(i), flat_.grad_views(i));
}

void Model::emulate_compute(const std::vector<double>& forward_s, const std::vector<double>& backward_s,
                            int64_t profiled_batch) {
  ST_CHECK(forward_s.size() == blocks_.size() && backward_s.size() == blocks_.size(),
           "emulated compute: the profile times {} forward and {} backward Blocks; this model has {}", forward_s.size(),
           backward_s.size(), blocks_.size());
  for (size_t b = 0; b < blocks_.size(); ++b)
    blocks_[b] =
        std::make_unique<EmulatedBlock>(std::move(blocks_[b]), forward_s[b], backward_s[b], profiled_batch, shapes_[b]);
  compute_emulated_ = true;
}

void Model::set_activation_dtype(DType dtype) {
  for (auto& b : blocks_) b->set_activation_dtype(dtype);
}

void Model::set_plan_device(Device device) {
  for (auto& b : blocks_) b->set_plan_device(device);
}

void Model::set_activation_checkpointing(Recompute mode, int every) {
  ST_CHECK(every >= 1, "parallel.checkpoint_every must be at least 1, got {}", every);
  int k = 0;
  for (auto& b : blocks_) {
    if (!b->can_recompute()) continue;
    b->set_recompute(k % every == 0 ? mode : Recompute::none);
    ++k;
  }
  ST_CHECK(mode == Recompute::none || k > 0,
           "parallel.activation_checkpointing = \"{}\" needs Blocks that recompute (model.kind = \"llama\"); "
           "this model has none",
           mode);
}

int64_t Model::activation_bytes(int64_t batch, bool training) const {
  int64_t bytes = 0, shared = 0;
  for (const auto& b : blocks_) {
    bytes += b->activation_bytes(batch);
    shared = std::max(shared, b->shared_bytes(batch));
  }
  bytes += shared;
  if (training) {  // as backward() allocates them
    int64_t widest = 0;
    for (size_t i = 1; i + 1 < shapes_.size(); ++i) widest = std::max(widest, shapes_[i].numel());
    bytes += int64_t{8} * std::max<int64_t>(1, batch * widest);
  }
  return bytes;
}

int64_t Model::kept_bf16_bytes(int64_t batch) const {
  int64_t bytes = 0, transient = 0;
  for (const auto& b : blocks_) {
    bytes += b->kept_bf16_bytes(batch);
    transient = std::max(transient, b->transient_bf16_bytes());
  }
  return bytes + transient;
}

int64_t Model::widened_bytes(int64_t batch, bool training) const {
  int64_t most = 0;
  for (const auto& b : blocks_) most = std::max(most, b->widened_bytes(batch, training));
  return most;
}

void Model::bind_block(int b, const Tensor& params, const Tensor& grads) {
  blocks_[size_t(b)]->bind(flat_.block_views(params, b), flat_.block_views(grads, b));
}

void Model::replace_buffers(const Tensor& params, const Tensor& grads) {
  flat_.replace_buffers(params, grads);
  for (int i = 0; i < num_blocks(); ++i) blocks_[size_t(i)]->bind(flat_.param_views(i), flat_.grad_views(i));
}

void Model::release_flat_buffers() {
  flat_.release_buffers();
  // Views into the freed buffers would keep them alive: bind nothing.
  for (int i = 0; i < num_blocks(); ++i) {
    const auto n = std::count_if(flat_.entries().begin(), flat_.entries().end(),
                                 [i](const ParamEntry& e) { return e.block == i; });
    const std::vector<Tensor> none(static_cast<size_t>(n));
    blocks_[size_t(i)]->bind(none, none);
  }
}

Tensor Model::forward(const Tensor& x, BlockHooks* hooks) {
  ST_CHECK(x.shape().ndim() >= 1 && x.numel() == x.dim(0) * input_sample().numel(),
           "model input of shape {} does not hold samples of shape {}", x.shape().str(), input_sample().str());
  batch_ = x.dim(0);
  if (batch_ > largest_forward_) {
    // Every Block grows: the old buffers go first (Block::release_activations).
    for (auto& block : blocks_) block->release_activations();
    largest_forward_ = batch_;
  }
  Tensor h = x.reshape(batched(batch_, input_sample()));
  for (int i = 0; i < num_blocks(); ++i) {
    if (hooks) hooks->before_forward(i);
    telemetry::Span span("block forward", "compute", i);
    h = blocks_[size_t(i)]->forward(h);
    if (hooks) hooks->after_forward(i);
  }
  return h;
}

void Model::backward(const Tensor& dout, bool accumulate, BlockHooks* hooks) {
  ST_CHECK(dout.numel() == batch_ * output_sample().numel(),
           "output gradient of shape {} does not match the last forward (batch {})", dout.shape().str(), batch_);
  if (batch_ > capacity_ || !(grad_a_.device() == dout.device())) {
    int64_t widest = 0;
    for (size_t i = 1; i + 1 < shapes_.size(); ++i) widest = std::max(widest, shapes_[i].numel());
    capacity_ = batch_;
    grad_a_ = Tensor();  // freed before their replacements: no overlap at the peak
    grad_b_ = Tensor();
    grad_a_ = Tensor::empty({std::max<int64_t>(1, batch_ * widest)}, DType::f32, dout.device());
    grad_b_ = Tensor::empty({std::max<int64_t>(1, batch_ * widest)}, DType::f32, dout.device());
  }
  Tensor g = dout;
  for (int i = num_blocks() - 1; i >= 0; --i) {
    if (hooks) hooks->before_backward(i);
    telemetry::Span span("block backward", "compute", i);
    Tensor din;  // the first block's input is data: no gradient needed
    if (i > 0) din = ((i % 2) ? grad_a_ : grad_b_).view(0, batched(batch_, shapes_[size_t(i)]));
    blocks_[size_t(i)]->backward(g, din, accumulate);
    if (hooks) hooks->after_backward(i);
    g = din;
  }
}

std::string Model::summary() const {
  std::string s;
  int64_t total = 0;
  for (int i = 0; i < num_blocks(); ++i) {
    int64_t n = 0;
    for (const auto& e : flat_.entries())
      if (e.block == i) n += e.spec.shape.numel();
    total += n;
    s += fmt::format("  block {} {:<8} {:>10} params  {}\n", i, blocks_[size_t(i)]->name(), n,
                     blocks_[size_t(i)]->describe());
  }
  s += fmt::format("  total {} parameters ({:.1f} MiB f32)\n", total, double(total) * 4 / (1 << 20));
  return s;
}

}  // namespace shardtrain::nn
