// A model: an ordered list of Blocks, their parameters in one FlatParameters,
// and the gradient buffers passed between Blocks. forward() runs Blocks
// 0..n-1, backward() n-1..0, calling the strategy's hooks around each.
#pragma once

#include "runtime/nn/block.h"
#include "runtime/nn/flat_parameters.h"
#include "runtime/nn/hooks.h"

#include <memory>
#include <string>
#include <vector>

namespace shardtrain::nn {

class Model {
 public:
  // layout_only: parameters laid out but not allocated, layers unbound:
  // enough for a plan (shapes, sizes, activation_bytes), not for computing.
  Model(std::vector<std::unique_ptr<Block>> blocks, Shape input_sample, bool layout_only = false);

  // x: [B, input_sample]. Returns the output of the last Block.
  Tensor forward(const Tensor& x, BlockHooks* hooks = nullptr);
  // dout: gradient of the loss w.r.t. the last forward's output. Parameter
  // gradients are written into flat().grads() (added when accumulate).
  void backward(const Tensor& dout, bool accumulate = false, BlockHooks* hooks = nullptr);

  void initialize(uint64_t seed) { flat_.initialize(seed); }
  // Moves parameters and gradients (values kept) to `device` and rebinds the
  // layers; activations follow the input's device at the next forward.
  void to(Device device);
  // Where the parameters live (also after FSDP released the flat buffers).
  Device device() const { return device_; }
  FlatParameters& flat() { return flat_; }
  const FlatParameters& flat() const { return flat_; }
  int num_blocks() const { return int(blocks_.size()); }
  Block& block(int i) { return *blocks_[size_t(i)]; }
  const Block& block(int i) const { return *blocks_[size_t(i)]; }
  const Shape& input_sample() const { return shapes_.front(); }
  const Shape& output_sample() const { return shapes_.back(); }

  // Binds Block b's layers to buffers holding just its range (FSDP: a
  // gathered copy and a gradient buffer), instead of the flat buffers.
  void bind_block(int b, const Tensor& params, const Tensor& grads);
  // Replaces the flat parameter and gradient buffers
  // (FlatParameters::replace_buffers) and rebinds every Block to them.
  void replace_buffers(const Tensor& params, const Tensor& grads);
  // Gives up the full flat buffers (FlatParameters::release_buffers); every
  // Block must be bound with bind_block before it computes.
  void release_flat_buffers();

  // Emulated compute (emulated_block.h): every Block's forward and backward
  // become waits of forward_s[b] and backward_s[b] per `profiled_batch`
  // samples; parameters, layout and binding stay the real Blocks'. An Error
  // when the profile does not have one time per Block.
  void emulate_compute(const std::vector<double>& forward_s, const std::vector<double>& backward_s,
                       int64_t profiled_batch);
  bool compute_emulated() const { return compute_emulated_; }

  // Every Block's Block::set_plan_device.
  void set_plan_device(Device device);
  // Every Block's Block::set_activation_dtype.
  void set_activation_dtype(DType dtype);
  // Activation checkpointing (recompute.h) for every `every`-th Block that
  // can recompute, counting from the first; the others keep everything. An
  // Error where `mode` is not none and no Block can.
  void set_activation_checkpointing(Recompute mode, int every = 1);

  // Bytes of every Block's activation_bytes(batch) and the largest
  // Block::shared_bytes, plus with `training` the two gradient buffers
  // passed between Blocks in backward.
  int64_t activation_bytes(int64_t batch, bool training) const;
  // Every Block's Block::kept_bf16_bytes, and the largest
  // Block::transient_bf16_bytes.
  int64_t kept_bf16_bytes(int64_t batch) const;
  // The largest Block::widened_bytes: transient, one op at a time.
  int64_t widened_bytes(int64_t batch, bool training) const;

  // One line per block with its layers and parameter count.
  std::string summary() const;

 private:
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<Shape> shapes_;  // sample shape entering block i; back() = model output
  FlatParameters flat_;
  Tensor grad_a_, grad_b_;  // gradients between blocks, ping-pong
  Device device_ = Device::cpu();
  int64_t capacity_ = 0, batch_ = 0;
  bool compute_emulated_ = false;
  int64_t largest_forward_ = 0;  // the largest batch a forward has seen
};

}  // namespace shardtrain::nn
