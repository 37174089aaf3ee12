// Activation checkpointing (parallel.activation_checkpointing): what a
// Block keeps from its forward for its backward, and what it computes again.
//   none       keeps every activation
//   selective  keeps the matrix products' outputs and recomputes the norms,
//              the attention core and the elementwise ops from them inside
//              its backward (Megatron-LM's selective recomputation)
//   full       keeps its input only and runs its whole forward again inside
//              its backward
// What is recomputed lives in one workspace the model's Blocks share, so
// the memory saved is every checkpointed Block's but one. Recomputing runs
// the same kernels on the same values: the results are those of `none`,
// bit for bit.
#pragma once

#include "runtime/core/enum_names.h"

#include <array>

namespace shardtrain::nn {

enum class Recompute { none, selective, full };
inline std::span<const EnumName<Recompute>> enum_names(Recompute) {
  static constexpr std::array<EnumName<Recompute>, 3> n = {
      {{Recompute::none, "none"}, {Recompute::selective, "selective"}, {Recompute::full, "full"}}};
  return n;
}

}  // namespace shardtrain::nn
