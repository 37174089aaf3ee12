// A Block: the unit of everything distributed. DDP fills gradient buckets in
// reverse Block order; FSDP gathers, frees and reduce-scatters one Block at a
// time. A Block owns its layers and its activation buffers, and has an
// explicit forward and backward.
#pragma once

#include "runtime/nn/layer.h"
#include "runtime/nn/recompute.h"

#include <memory>
#include <string>
#include <vector>

namespace shardtrain::nn {

class Block {
 public:
  virtual ~Block() = default;

  const std::string& name() const { return name_; }
  // All parameters of the block's layers, in a fixed order, with names
  // qualified by the layer ("0.linear.weight").
  virtual std::vector<ParamSpec> param_specs() const = 0;
  virtual void bind(std::span<const Tensor> params, std::span<const Tensor> grads) = 0;
  virtual Shape output_shape(const Shape& in) const = 0;

  // Returns the output [B, output_shape]; the buffer is the block's and stays
  // valid until the next forward. The input must stay valid until backward.
  virtual Tensor forward(const Tensor& in) = 0;
  // din: [B, in sample] to be written, or undefined when not needed.
  virtual void backward(const Tensor& dout, const Tensor& din, bool accumulate) = 0;
  // Frees its activation and gradient buffers and its layers' saved inputs;
  // the next forward allocates them again. Model::forward calls it on every
  // Block before a batch larger than any before: otherwise the old buffers
  // (held by the Blocks and by the next Block's saved input) would live
  // beside the new ones at the peak.
  virtual void release_activations() = 0;

  // The type of the activations the Block keeps between its layers: f32,
  // or bf16 under mixed precision (kernels/ops.h), for Blocks that have a
  // bf16 form (TransformerBlock); the others stay f32. Takes effect at the
  // next forward.
  virtual void set_activation_dtype(DType /*dtype*/) {}
  // Activation checkpointing (recompute.h), for Blocks that can recompute
  // (LlamaBlock); takes effect at the next forward.
  virtual bool can_recompute() const { return false; }
  // The device the Block will run on, for activation_bytes before any
  // forward (the attention kernels keep different state on the CPU and on a
  // GPU). The CPU until told.
  virtual void set_plan_device(Device /*device*/) {}
  virtual void set_recompute(Recompute /*mode*/) {}

  // Human-readable structure, e.g. "linear(784->1024) relu".
  virtual std::string describe() const = 0;

  // Bytes the Block allocates for `batch` samples: activations kept for
  // backward, gradient buffers between its layers, its layers' workspaces.
  // Buffers grow to the largest batch seen (training or evaluation).
  virtual int64_t activation_bytes(int64_t batch) const = 0;
  // Bytes of the workspace this Block shares with the model's other Blocks
  // of its kind (LlamaWorkspace) at `batch`: counted once per model, the
  // largest any Block asks for.
  virtual int64_t shared_bytes(int64_t /*batch*/) const { return 0; }
  // On the CPU, with bf16 activations: the f32 copies the op that makes the
  // most holds while it runs (kernels/ops.h widens around the f32 kernels),
  // in a forward, or with `training` a forward and backward. 0 otherwise.
  virtual int64_t widened_bytes(int64_t /*batch*/, bool /*training*/) const { return 0; }
  // Whether the Block's output is bf16 (as a model's logits may be, for the
  // loss to widen).
  virtual bool outputs_bf16() const { return false; }
  // Where the products take bf16 operands (ops::linear_keeps_bf16: a GPU's
  // bf16 GEMMs, the CPU's bf16 products): its layers' Layer::kept_bf16_bytes for
  // `batch` samples (the copies grow with the batch as the activations do).
  virtual int64_t kept_bf16_bytes(int64_t /*batch*/) const = 0;
  // There: bf16 copies the Block makes and frees within one of its
  // layers' forward or backward (Linear::set_transient_weight_copy), the
  // largest; a model holds one at a time.
  virtual int64_t transient_bf16_bytes() const { return 0; }

 protected:
  explicit Block(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// A transformer Block's parameters of one of its layers, named
// "<name>.<kind>.<param>": a linear layer's weight N(0, weight_std^2) and
// its bias 0 (GPT-2's rule); other layers' as they declare them.
void append_layer_specs(std::vector<ParamSpec>& all, const char* name, const Layer& layer, float weight_std);

// The common Block: layers applied one after another.
class SequentialBlock final : public Block {
 public:
  SequentialBlock(std::string name, std::vector<std::unique_ptr<Layer>> layers, Shape in_sample);

  std::vector<ParamSpec> param_specs() const override;
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override;
  Shape output_shape(const Shape& in) const override;
  Tensor forward(const Tensor& in) override;
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override;
  void release_activations() override;
  std::string describe() const override;
  int64_t activation_bytes(int64_t batch) const override;
  int64_t widened_bytes(int64_t batch, bool training) const override;
  int64_t kept_bf16_bytes(int64_t batch) const override;
  // bf16 outputs only where every layer takes_bf16() (a GPT's head: its
  // LayerNorm and the classifier, whose logits are then bf16); the
  // gradients between the layers stay f32.
  void set_activation_dtype(DType dtype) override;
  bool outputs_bf16() const override { return act_ == DType::bf16; }
  void set_plan_device(Device device) override { plan_device_ = device; }

 private:
  void ensure_capacity(int64_t batch, Device device);
  // Whether layer i is a convolution that makes the 2x2 max-pool after it
  // (layer i + 1) as it goes, its own output never made
  // (ops::conv2d_maxpool_fuses), for `batch` samples on `device`.
  bool pools_in_place(size_t i, int64_t batch, Device device) const;
  // Whether layer i is a ReLU that such a convolution (layer i - 2) makes
  // with its pool: no output of its own, and its backward is the pool's.
  bool relu_in_pool(size_t i, int64_t batch, Device device) const;

  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;         // sample shape entering layer i; shapes_[n] = block output
  std::vector<size_t> param_counts_;  // parameters declared by each layer
  std::vector<Tensor> outputs_;       // each layer's output, capacity_ samples (none where made in place)
  Tensor grad_a_, grad_b_;            // ping-pong gradient buffers between layers
  int64_t capacity_ = 0, batch_ = 0;
  Device device_;                    // where the buffers live: the device of the input
  Device plan_device_;               // activation_bytes's
  DType act_ = DType::f32;           // of outputs_ from the next forward
  DType outputs_type_ = DType::f32;  // of outputs_ as allocated
};

// Appends a SequentialBlock of `layers`, named `name`, for samples of shape
// `in` to `blocks`, and returns the sample shape it outputs: how a model is
// put together, Block after Block (models.cpp, and a custom model's
// builder, model_registry.h).
Shape add_sequential_block(std::vector<std::unique_ptr<Block>>& blocks, std::string name,
                           std::vector<std::unique_ptr<Layer>> layers, const Shape& in);

}  // namespace shardtrain::nn
