// FSDP's options ([parallel.fsdp]): the sharding mode, prefetch, and mixed
// precision.
#pragma once

#include "runtime/core/dtype.h"
#include "runtime/core/enum_names.h"

#include <array>
#include <cstdint>

namespace shardtrain::parallel {

enum class ShardingMode {
  full_shard,     // parameters gathered for forward, freed, gathered again for backward
  shard_grad_op,  // parameters gathered for forward and kept until the Block's backward
  hybrid,  // full_shard within each shard group (a node), shards replicated (gradients all-reduced) across groups
};

inline std::span<const EnumName<ShardingMode>> enum_names(ShardingMode) {
  static constexpr std::array<EnumName<ShardingMode>, 3> names = {{
      {ShardingMode::full_shard, "full"},
      {ShardingMode::shard_grad_op, "grad_op"},
      {ShardingMode::hybrid, "hybrid"},
  }};
  return names;
}

struct FsdpOptions {
  ShardingMode mode = ShardingMode::full_shard;
  // K: all-gathers in flight ahead of the Block being computed (>= 0); the
  // gather and gradient buffers are K + 1 padded Blocks each.
  int prefetch = 2;
  // HYBRID: the ranks that share the shards, as groups of this many
  // consecutive ranks (it divides the job's ranks); 0: the ranks of each
  // node. A group larger than a node trades memory (a smaller shard) for
  // gathers that cross nodes; a smaller one the other way.
  int shard_group_size = 0;
  // Debug: fill a freed Block's parameters (and a reduce-scattered Block's
  // gradients) in the model's flat buffers with NaN.
  bool poison_freed = false;
  // Mixed precision. param_dtype bf16: each rank's f32 master shard is
  // rounded to bf16 for the all-gather (half the bytes) and the Blocks
  // compute with those values (widened to f32 in the gather buffer) in GEMMs
  // on bf16 operands with f32 accumulation, which Fsdp switches on around
  // every Block it gathers. reduce_dtype bf16: gradients are
  // reduce-scattered in bf16 (summed in f32 per hop) and widened into the
  // f32 gradient shard. The optimizer always steps the f32 master shard.
  DType param_dtype = DType::f32;
  DType reduce_dtype = DType::f32;
};

// An Error naming the parallel.fsdp key that is out of range.
void validate(const FsdpOptions& options);
// An Error naming parallel.fsdp.shard_group_size when it is set and its
// groups do not split `ranks`.
void check_shard_groups(const FsdpOptions& options, int ranks);

}  // namespace shardtrain::parallel
