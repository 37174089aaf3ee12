// The header that leads every one-shot message (all-reduce, reduce-scatter,
// all-gather): the collective's signature. Every receiver checks every
// peer's header before it uses the data, so ranks that issued different
// collectives under one sequence number fail with both named, at once,
// instead of reducing or copying bytes that belong to something else. It
// stands in for the arrival check an MPI collective needs (comm/
// arrival_barrier.h): the data travels with the proof that it belongs.
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::comm {

enum class OneshotOp : uint8_t { allreduce, reduce_scatter, allgather };

struct OneshotHeader {
  int64_t seq = 0;
  int64_t bytes = 0;  // the collective's input on each rank
  float scale = 1.0f;
  uint8_t dtype = 0, magic = 0x5a;
  OneshotOp op = OneshotOp::allreduce;
  uint8_t pad = 0;
  int64_t reserved = 0;
};
static_assert(sizeof(OneshotHeader) == 32);

OneshotHeader oneshot_header(OneshotOp op, int64_t seq, int64_t bytes, DType dtype, float scale);

// Throws an Error naming both collectives where `theirs`, from rank `peer`,
// is not `mine`.
void check_oneshot_header(const OneshotHeader& mine, const OneshotHeader& theirs, int peer);

}  // namespace shardtrain::comm
