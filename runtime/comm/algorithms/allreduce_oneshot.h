// One-shot all-reduce for small buffers: every rank sends its whole buffer,
// behind a header that names the collective, to every other rank, and then
// adds the p buffers up itself, in rank order 0 .. p-1. One message latency
// instead of MPI's log2(p) rounds plus the arrival check that has to precede
// them (comm/arrival_barrier.h), and the same guarantees:
// - no spinning while a peer is late: the receives are polled with the
//   transport's Backoff like every other wait of the engine;
// - mismatched collectives are caught: the header carries the collective's
//   signature (oneshot_header.h) and every rank checks
//   every peer's before it adds anything; a different size or a different
//   collective altogether makes a message of the wrong size, which the
//   transport rejects (the first message of a one-shot shares its tag with
//   the arrival check of MPI's collectives, so the two collide too). Either
//   way an Error, which the communicator hands to the watchdog;
// - deterministic: every rank adds the same p buffers in the same order, so
//   every rank ends with the same bits (an average's 1/p is fused into the
//   last addition).
// It moves (p-1) times the buffer per rank where a ring moves 2(p-1)/p of it,
// so it pays only while latency dominates: up to CommOptions::oneshot_bytes.
//
// Wire format, per peer and per all-reduce: the stream [Header | data] cut
// into fragments that each fit the transport's eager limit, so that a
// message goes out at once instead of waiting for a rendezvous's extra round
// trip: kFragmentBytes where ranks share a node (Open MPI's shared-memory
// transport, ~4040 bytes of payload: 2.2 us -> 0.4 us for 4 KiB measured),
// kFragmentBytesAcrossNodes where every peer is on another node (its TCP
// transport's 64 KiB); past kWholeRestBytes everything after the first
// fragment goes as one message (the library's single-copy path wins there).
// Fragment 0 is staged (header + the first bytes of data); the others are
// sent straight from the caller's buffer and land straight in a contiguous
// receive area.
//
// Several all-reduces at once (coalescing): the communicator hands over the
// all-reduces already queued behind each other on disjoint buffers; all their
// messages are posted first, then each is completed in issue order. Each
// message is tagged by its own collective's sequence number, so ranks that
// grouped the same all-reduces differently still match message for message.
#pragma once

#include "runtime/comm/algorithms/oneshot_header.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/engine/scratch.h"
#include "runtime/core/dtype.h"

#include "runtime/comm/algorithms/inplace_allreduce.h"

#include <cstdint>
#include <span>
#include <vector>

namespace shardtrain::comm {

class AllreduceOneshot {
 public:
  using Op = InPlaceAllreduce;  // arrived_at: when every peer's header had arrived

  // Eager payload limit of Open MPI 4.1's shared-memory transport is ~4040
  // bytes; a multiple of 64 below it.
  static constexpr int64_t kFragmentBytes = 4032;
  // Where no two ranks share a node: its TCP transport's (mpi_transport.h).
  static constexpr int64_t kFragmentBytesAcrossNodes = kTcpEagerBytes;
  // Beyond this many bytes the rest of the buffer after fragment 0 goes as
  // one message (measured 2 ranks, exchange only: 64 KiB 4.7 us as eager
  // fragments vs 5.9 us whole; 256 KiB 18.7 vs 17.5).
  static constexpr int64_t kWholeRestBytes = 128 << 10;

  // Bookkeeping reused from one call to the next (the communicator keeps it):
  // nothing is allocated per collective once it has grown.
  struct Workspace;

  // fragment_bytes: kFragmentBytes, or kFragmentBytesAcrossNodes where no
  // two ranks of the transport share a node (every rank must pass the same).
  AllreduceOneshot(MpiTransport& transport, std::span<Op> ops, Scratch& scratch, Workspace& workspace,
                   int64_t fragment_bytes = kFragmentBytes);

  void run() {
    post();
    for (size_t i = 0; i < ops_.size(); ++i) finish(i);
  }

  // Phase 1: every message of every all-reduce posted, receives first.
  void post();
  // Phase 2, in order: op i's messages complete, headers checked, the p
  // buffers added in rank order into op i's buffer.
  void finish(size_t i);

 private:
  using Header = OneshotHeader;
  // Where op i's messages live in the scratch areas.
  struct Slot {
    size_t recv_offset = 0;  // of the [Header | data] area of peer 0 (+ k * stride for peer k)
    size_t recv_stride = 0;
    size_t send_offset = 0;    // of the staged fragment 0
    size_t first_request = 0;  // receives of op i: [first, first + receives), then as many sends
    size_t receives = 0;
  };

  // The pieces of one peer's [Header | data] stream of `bytes` of data.
  int64_t piece_bytes(int64_t bytes) const;  // every fragment's size but the last's
  int64_t fragments(int64_t bytes) const;
  int64_t fragment_offset(int64_t bytes, int64_t f) const;
  int64_t fragment_size(int64_t bytes, int64_t f) const;

  static Header header_of(const Op& op);
  std::byte* area(size_t i, int peer_index) const;

  MpiTransport& t_;
  std::span<Op> ops_;
  Workspace& w_;
  int64_t fragment_bytes_;
  std::byte* recv_ = nullptr;
  std::byte* send_ = nullptr;

 public:
  struct Workspace {
    std::vector<Slot> slots;
    std::vector<MpiTransport::Request> requests;
    std::vector<const void*> sources;
  };
};

}  // namespace shardtrain::comm
