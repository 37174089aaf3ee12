// Ring all-gather, pipelined by chunks: the second phase of the ring
// all-reduce, and allgather on its own.
//
// p ranks, p segments (RingLayout), segment r already in place on rank r. At
// step s (0 .. p-2) rank r forwards segment r-s to its right neighbour and
// receives segment r-s-1 from its left one, straight into its final place (no
// staging: nothing is added). A chunk is forwarded as soon as it has arrived,
// so consecutive steps overlap chunk by chunk. What every rank ends with is
// the owner's bytes, copied: identical on every rank.
#pragma once

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/algorithms/ring_layout.h"

#include <cstddef>

namespace shardtrain::comm {

class AllgatherRing {
 public:
  // `buf`: layout.numel() elements of `elem_bytes` bytes each. `own`: this
  // rank's segment if it is not in place in `buf` yet (the allgather's input):
  // it is sent from there and copied into `buf` while the first chunks move.
  AllgatherRing(MpiTransport& transport, const RingLayout& layout, size_t elem_bytes, int tag, void* buf,
                const void* own = nullptr);

  void run();

  // Receives posted ahead; they land in place, so this costs no memory.
  static constexpr int kDepth = 4;

 private:
  int send_segment(int64_t step) const { return ring_mod(rank_ - step, layout_.ranks()); }
  int recv_segment(int64_t step) const { return ring_mod(rank_ - step - 1, layout_.ranks()); }

  MpiTransport& t_;
  RingLayout layout_;
  size_t elem_;
  int tag_;
  int rank_;
  std::byte* buf_;
  const std::byte* own_;
};

}  // namespace shardtrain::comm
