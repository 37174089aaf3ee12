// One all-reduce of a coalesced group as the in-place algorithms take it
// (AllreduceOneshot, AllreduceShm): the buffer is reduced where it is.
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::comm {

struct InPlaceAllreduce {
  int64_t seq = 0;
  DType dtype = DType::f32;
  void* buf = nullptr;  // numel elements, reduced in place
  int64_t numel = 0;
  float scale = 1.0f;     // 1/p for an average
  double arrived_at = 0;  // out: when every rank's contribution had arrived
};

}  // namespace shardtrain::comm
