// Pipelined, chunked ring all-reduce: the reduce-scatter phase
// (ReduceScatterRing) then the all-gather phase (AllgatherRing), in place.
//
// Each rank sends and receives 2(p-1)/p of the buffer, the least any
// all-reduce can, in chunks small enough that a received chunk is added while
// still in cache and the next one is already moving. An average costs nothing
// extra: the owner scales its segment in the last addition, before the
// all-gather. Deterministic: a segment is summed once, by its owner, in ring
// order; every rank then receives the owner's bits.
#pragma once

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/engine/scratch.h"
#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::comm {

class AllreduceRing {
 public:
  // `buf`: numel elements of `dtype` (f32 or bf16), reduced in place and
  // multiplied by `scale` (1/p for an average). Tags come from the
  // collective's sequence number.
  AllreduceRing(MpiTransport& transport, int64_t seq, DType dtype, void* buf, int64_t numel, float scale,
                int64_t chunk_bytes, Scratch& scratch);

  void run();

 private:
  MpiTransport& t_;
  int64_t seq_;
  DType dtype_;
  void* buf_;
  int64_t numel_;
  float scale_;
  int64_t chunk_elems_;
  Scratch& scratch_;
};

}  // namespace shardtrain::comm
