// The dtypes a configuration may name for storage and communication (f32,
// bf16), as an enum_names table (enum_names.h).
#pragma once

#include "runtime/core/dtype.h"
#include "runtime/core/enum_names.h"

#include <array>

namespace shardtrain {

inline std::span<const EnumName<DType>> enum_names(DType) {
  static constexpr std::array<EnumName<DType>, 2> names = {{{DType::f32, "f32"}, {DType::bf16, "bf16"}}};
  return names;
}

}  // namespace shardtrain
