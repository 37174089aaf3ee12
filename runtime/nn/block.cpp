#include "runtime/nn/block.h"

#include "kernels/ops.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/maxpool2d.h"

#include <algorithm>

namespace shardtrain::nn {
SequentialBlock::SequentialBlock(std::string name, std::vector<std::unique_ptr<Layer>> layers, Shape in_sample)
    : Block(std::move(name)), layers_(std::move(layers)) {
  ST_CHECK(!layers_.empty(), "block {} has no layers", this->name());
  shapes_.push_back(in_sample);
  for (size_t i = 0; i < layers_.size(); ++i) {
    Shape out = with_context(fmt::format("block {} layer {} ({})", this->name(), i, layers_[i]->kind()),
                             [&] { return layers_[i]->output_shape(shapes_.back()); });
    shapes_.push_back(out);
    param_counts_.push_back(layers_[i]->param_specs().size());
  }
}

Shape add_sequential_block(std::vector<std::unique_ptr<Block>>& blocks, std::string name,
                           std::vector<std::unique_ptr<Layer>> layers, const Shape& in) {
  auto block = std::make_unique<SequentialBlock>(std::move(name), std::move(layers), in);
  Shape out = block->output_shape(in);
  blocks.push_back(std::move(block));
  return out;
}

void append_layer_specs(std::vector<ParamSpec>& all, const char* name, const Layer& layer, float weight_std) {
  for (ParamSpec p : layer.param_specs()) {
    if (layer.kind() == "linear") {
      const bool weight = p.name == "weight";
      p.init = weight ? Init::normal : Init::zeros;
      p.std = weight ? weight_std : 0.0f;
    }
    p.name = fmt::format("{}.{}.{}", name, layer.kind(), p.name);
    all.push_back(std::move(p));
  }
}

std::vector<ParamSpec> SequentialBlock::param_specs() const {
  std::vector<ParamSpec> all;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (ParamSpec p : layers_[i]->param_specs()) {
      p.name = fmt::format("{}.{}.{}", i, layers_[i]->kind(), p.name);
      all.push_back(std::move(p));
    }
  }
  return all;
}

void SequentialBlock::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  size_t at = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->bind(params.subspan(at, param_counts_[i]), grads.subspan(at, param_counts_[i]));
    at += param_counts_[i];
  }
}

Shape SequentialBlock::output_shape(const Shape& in) const {
  ST_CHECK(in == shapes_.front(), "block {} was built for samples of shape {}, got {}", name(), shapes_.front().str(),
           in.str());
  return shapes_.back();
}

int64_t SequentialBlock::activation_bytes(int64_t batch) const {
  // As ensure_capacity allocates, plus each layer's own buffers.
  int64_t floats = 0, widest = 0, workspace = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!pools_in_place(i, batch, plan_device_) && !relu_in_pool(i, batch, plan_device_))
      floats += batch * shapes_[i + 1].numel();
    widest = std::max(widest, shapes_[i].numel());
    workspace += layers_[i]->workspace_bytes(shapes_[i], batch);
  }
  return int64_t(dtype_size(act_)) * floats + int64_t(sizeof(float)) * 2 * batch * widest + workspace;
}

int64_t SequentialBlock::widened_bytes(int64_t batch, bool training) const {
  if (act_ != DType::bf16) return 0;
  // A layer widens its output and, after the first, its bf16 input; its
  // backward the same sizes (the output's gradient, the input). A linear
  // layer that reads and writes bf16 as it is widens nothing, nor does a
  // LayerNorm's forward (its output goes through buffers of a few rows).
  const bool linear_reads_bf16 = ops::cpu_linear_reads_bf16();
  int64_t floats = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int64_t in = i > 0 ? shapes_[i].numel() : 0, out = shapes_[i + 1].numel();
    const std::string kind = layers_[i]->kind();
    if (linear_reads_bf16 && kind == "linear") continue;
    floats = std::max(floats, batch * (kind == "layernorm" && !training ? 0 : in + out));
  }
  return int64_t(sizeof(float)) * floats;
}

int64_t SequentialBlock::kept_bf16_bytes(int64_t batch) const {
  int64_t bytes = 0;  // the block's input is f32, the later layers' inputs its outputs' type
  for (size_t i = 0; i < layers_.size(); ++i)
    bytes += layers_[i]->kept_bf16_bytes(shapes_[i], batch, i > 0 ? act_ : DType::f32);
  return bytes;
}

void SequentialBlock::set_activation_dtype(DType dtype) {
  // A LayerNorm reads the f32 residual stream: it may only come first.
  bool all = true;
  for (size_t i = 0; i < layers_.size(); ++i)
    all = all && layers_[i]->takes_bf16() && (i == 0 || layers_[i]->kind() != "layernorm");
  act_ = all ? dtype : DType::f32;
}

// Activation and gradient buffers grow to the largest batch seen (training or
// evaluation) and are then reused: no allocation in the steady state.
void SequentialBlock::ensure_capacity(int64_t batch, Device device) {
  if (batch <= capacity_ && device == device_ && outputs_type_ == act_) return;
  // The old buffers go first: assigned over, each would live until its
  // replacement exists, and the peak would hold both.
  release_activations();
  capacity_ = batch;
  device_ = device;
  outputs_type_ = act_;
  int64_t widest = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const bool none = pools_in_place(i, batch, device) || relu_in_pool(i, batch, device);
    outputs_.push_back(none ? Tensor() : Tensor::empty(batched(batch, shapes_[i + 1]), act_, device));
    widest = std::max(widest, shapes_[i].numel());
  }
  grad_a_ = Tensor::empty({batch * widest}, DType::f32, device);
  grad_b_ = Tensor::empty({batch * widest}, DType::f32, device);
}

void SequentialBlock::release_activations() {
  outputs_.clear();
  grad_a_ = Tensor();
  grad_b_ = Tensor();
  capacity_ = 0;
  for (auto& layer : layers_) layer->release_activations();
}

bool SequentialBlock::pools_in_place(size_t i, int64_t batch, Device device) const {
  if (i + 1 >= layers_.size() || batch == 0) return false;
  const auto* conv = dynamic_cast<const Conv2d*>(layers_[i].get());
  const auto* pool = dynamic_cast<const MaxPool2d*>(layers_[i + 1].get());
  return conv != nullptr && pool != nullptr &&
         ops::conv2d_maxpool_fuses(device, conv->shape_for(batched(batch, shapes_[i])),
                                   pool->shape_over(batched(batch, shapes_[i + 1])));
}

bool SequentialBlock::relu_in_pool(size_t i, int64_t batch, Device device) const {
  return i >= 2 && dynamic_cast<const ReLU*>(layers_[i].get()) != nullptr && pools_in_place(i - 2, batch, device);
}

Tensor SequentialBlock::forward(const Tensor& in) {
  batch_ = in.dim(0);
  ensure_capacity(batch_, in.device());
  Tensor x = in;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Shape shape = batched(batch_, shapes_[i + 1]);
    if (pools_in_place(i, batch_, in.device())) {
      auto& conv = static_cast<Conv2d&>(*layers_[i]);
      auto& pool = static_cast<MaxPool2d&>(*layers_[i + 1]);
      const kernels::Pool2dShape window = pool.shape_over(shape);
      const Tensor pooled = outputs_[i + 1].view(0, batched(batch_, shapes_[i + 2]));
      // A ReLU after the pool comes out of the pool too: no pass of its own
      // over the activations, forward or backward.
      const bool relu = relu_in_pool(i + 2, batch_, in.device());
      conv.forward_pooled(x, outputs_[i].defined() ? outputs_[i].view(0, shape) : Tensor(), pooled,
                          pool.begin_forward(window, in.device()), window, relu);
      x = pooled;
      i += relu ? 2 : 1;
      continue;
    }
    Tensor y = outputs_[i].defined() ? outputs_[i].view(0, shape) : Tensor::empty(shape, act_, in.device());
    layers_[i]->forward(x, y);
    x = y;
  }
  return x;
}

void SequentialBlock::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  Tensor g = dout;
  bool into_a = true;  // the buffer g is not in
  for (size_t i = layers_.size(); i-- > 0;) {
    // A ReLU made with the pool passes its gradient on: the pool's
    // backward gives none to the windows it zeroed.
    if (relu_in_pool(i, batch_, device_)) continue;
    Tensor dx;
    if (i == 0) {
      dx = din;  // may be undefined: the model's first layer needs no input gradient
    } else {
      dx = (into_a ? grad_a_ : grad_b_).view(0, batched(batch_, shapes_[i]));
      into_a = !into_a;
    }
    layers_[i]->backward(g, dx, accumulate);
    g = dx;
  }
}

std::string SequentialBlock::describe() const {
  std::string s;
  for (size_t i = 0; i < layers_.size(); ++i)
    s += fmt::format("{}{} {}->{}", i ? ", " : "", layers_[i]->kind(), shapes_[i].str(), shapes_[i + 1].str());
  return s;
}

}  // namespace shardtrain::nn
