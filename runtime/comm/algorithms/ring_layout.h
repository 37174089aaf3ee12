// How a ring collective cuts a buffer: one segment per rank (sizes differing
// by at most one element), each segment cut into the same number of chunks
// (the pipeline's unit, at most chunk_elems elements). Chunk c starts at the
// same offset within every segment (only a segment's last chunk is shorter),
// so staging laid out by chunk never straddles two chunks. Every rank computes
// the same layout from the same numbers, so sender and receiver agree on every
// message's size without telling each other.
#pragma once

#include <algorithm>
#include <cstdint>

namespace shardtrain::comm {

struct Range {
  int64_t offset = 0, count = 0;  // in elements
};

class RingLayout {
 public:
  RingLayout(int64_t numel, int ranks, int64_t chunk_elems) : numel_(numel), ranks_(ranks) {
    const int64_t largest = (numel + ranks - 1) / ranks;
    chunk_elems = std::max<int64_t>(1, chunk_elems);
    chunks_ = std::max<int64_t>(1, (largest + chunk_elems - 1) / chunk_elems);
    span_ = (largest + chunks_ - 1) / chunks_;
  }

  int ranks() const { return ranks_; }
  int64_t numel() const { return numel_; }
  int64_t chunks() const { return chunks_; }    // per segment
  int64_t chunk_span() const { return span_; }  // elements of a full chunk

  Range segment(int s) const {
    const int64_t base = numel_ / ranks_, extra = numel_ % ranks_;
    return {s * base + std::min<int64_t>(s, extra), base + (s < extra ? 1 : 0)};
  }
  // Chunk c of segment s, as a range of the whole buffer.
  Range chunk(int s, int64_t c) const {
    const Range seg = segment(s);
    const int64_t begin = std::min(seg.count, c * span_);
    return {seg.offset + begin, std::min(seg.count, begin + span_) - begin};
  }

 private:
  int64_t numel_;
  int ranks_;
  int64_t chunks_ = 1;
  int64_t span_ = 0;
};

// x modulo p in [0, p): ring neighbours and the segment of a step.
inline int ring_mod(int64_t x, int p) { return int(((x % p) + p) % p); }

// The code in a message tag (MpiTransport::tag): which collective and phase a
// message belongs to, so that messages of different kinds never match.
enum TagCode : int {
  kTagAllreduceReduceScatter = 1,
  kTagAllreduceAllgather = 2,
  kTagReduceScatter = 3,
  kTagAllgather = 4,
  kTagHierarchicalReduceScatter = 5,  // within the node; across nodes is an AllreduceRing
  kTagHierarchicalAllgather = 6,
  // ArrivalBarrier, and the first message (with the header) of a one-shot
  // all-reduce: ranks that issued an MPI collective and a one-shot as the
  // same collective then receive each other's messages, of the wrong size,
  // and fail at once instead of waiting for the watchdog's timeout.
  kTagArrival = 7,
  kTagOneshot = 8,  // AllreduceOneshot's other fragments
};

}  // namespace shardtrain::comm
