// All parameters of a model in one flat f32 buffer, gradients in a second one
// of the same layout, with one view per parameter. Each Block's parameters are
// one contiguous range (aligned to 64 bytes), so DDP buckets and FSDP shards
// are byte ranges of these buffers, never per-parameter copies.
#pragma once

#include "runtime/core/tensor.h"
#include "runtime/nn/param.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::nn {

struct ParamEntry {
  std::string name;  // "<block>.<layer>.<kind>.<param>", e.g. "fc0.0.linear.weight"
  int block = 0;
  int64_t offset = 0;  // in elements, into the flat buffers
  ParamSpec spec;
};

struct BlockRange {
  int64_t offset = 0;  // first element of the block's parameters
  int64_t numel = 0;   // elements up to the next block, padding included
};

class FlatParameters {
 public:
  // Elements each Block range is aligned to (64 bytes of f32).
  static constexpr int64_t kAlignElems = 16;

  FlatParameters() = default;
  // Lays out the given per-block specs (block order, declaration order);
  // allocate = false: the layout alone, no buffers (has_buffers() false),
  // for a plan of a model larger than this machine's memory.
  FlatParameters(const std::vector<std::string>& block_names, const std::vector<std::vector<ParamSpec>>& block_specs,
                 bool allocate = true);

  // Deterministic initialization: parameter i draws from the stream
  // (seed, "init", i), independent of every other parameter.
  void initialize(uint64_t seed);
  // Moves both buffers to `device`, values kept (views taken before are stale).
  void to(Device device);

  // The full buffers; undefined after release_buffers().
  const Tensor& params() const { return params_; }
  const Tensor& grads() const { return grads_; }
  // Frees both full buffers (FSDP, whose ranks hold shards and bind each
  // Block to a gathered copy while it computes). The layout stays.
  void release_buffers();
  bool has_buffers() const { return params_.defined(); }
  // Points params() and grads() at `params` and `grads`: numel() f32
  // elements each on the same device, usually the front of larger buffers a
  // strategy reduces from and gathers into past the end (ZeRO-1); the caller
  // rebinds the layers (Model::replace_buffers).
  void replace_buffers(const Tensor& params, const Tensor& grads);
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const std::vector<BlockRange>& blocks() const { return blocks_; }
  int64_t numel() const { return numel_; }
  // Views of Block `block`'s parameters in a buffer holding just that Block's
  // range (element 0 = the Block's first flat element), e.g. a gather buffer.
  std::vector<Tensor> block_views(const Tensor& block_buffer, int block) const;
  // Elements from the Block's start to the end of its last parameter (the
  // rest of its range is alignment padding, always zero).
  int64_t block_param_extent(int block) const;
  // Elements of real parameters (without alignment padding).
  int64_t parameter_count() const;

  // Views for one block, in its declaration order.
  std::vector<Tensor> param_views(int block) const;
  std::vector<Tensor> grad_views(int block) const;

 private:
  std::vector<Tensor> views(const Tensor& flat, int block) const;

  Tensor params_, grads_;
  int64_t numel_ = 0;
  std::vector<ParamEntry> entries_;
  std::vector<BlockRange> blocks_;
};

}  // namespace shardtrain::nn
