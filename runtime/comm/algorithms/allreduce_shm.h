// All-reduce through shared memory, for communicators whose ranks all live on
// one node (ShmWindow): reduce-scatter and all-gather by plain loads and
// stores, with no MPI call on the way.
//
// One step moves up to kHalfBytes of every rank's data:
//   1. copy in:   each rank copies its piece of data into its own area;
//   2. arrive:    it publishes the step's descriptors, then its arrival;
//   3. reduce:    once every rank has arrived, rank s adds up slice s (1/p
//                 of the step) of the p areas, in rank order 0 .. p-1, into
//                 its own area, and copies it into its own buffer;
//   4. gather:    once every rank has reduced, each copies the other slices
//                 from their owners' areas into its buffer.
// (A step of at most kReduceWholeBytes skips 3-4: every rank adds up all of
// it, in the same order.)
// Each element is added up once, by its slice's owner, in rank order, and
// copied from there: the same bits on every rank, whatever the grouping and
// chunking (an average's 1/p in the last addition). Consecutive steps use
// the two halves of each area in turn; a rank writes a half again only once
// every rank is done reading it (step e waits for step e-2's "done").
//
// A buffer larger than a half goes in chunks, one per step; small all-reduces
// queued behind each other (same dtype and scale) are packed into one step
// (coalescing). Ranks may have grouped different numbers of them: each
// publishes what it packed, and the step covers the common prefix (the
// others are packed again in the next step). Before adding anything every
// rank compares every rank's descriptors with its own (sequence number,
// size, dtype, scale, offset): mismatched collectives fail at once, and a
// peer that announced another collective as the same sequence number too.
//
// Measured on 2 cores (2 ranks, f32, against MPI_Allreduce in the same run,
// docs/comm.md): 1.4-6x at 4 KiB - 16 MiB, 5-7x at 32-256 MiB (14-17 GB/s
// busbw, where the chunked ring it replaces reached ~5). Half size: 256 KiB steps ran fastest (2 and 4 ranks; 1 MiB:
// 0.75-0.9x of that from 1 MiB up, 4 MiB: 0.5-0.7x), the step's data staying in cache.
#pragma once

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/transport/shm_window.h"
#include "runtime/core/dtype.h"

#include <array>
#include "runtime/comm/algorithms/inplace_allreduce.h"

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace shardtrain::comm {

class AllreduceShm {
 public:
  using Op = InPlaceAllreduce;  // arrived_at: when every rank had arrived at its first step

  static constexpr int64_t kHalfBytes = 256 << 10;
  // Steps up to this size skip the reduce-scatter: every rank adds up the
  // whole step (p times the reads, one wait for the other ranks instead of
  // two). Measured one at a time (latency): 4 ranks on 2 cores, 8 KiB 33 ->
  // 17 us (every wait there is a switch between ranks); 2 ranks the same up
  // to 16 KiB, slower beyond (32 KiB: 2.2 -> 7 us, reading all of the
  // peers' fresh data from the other core's cache).
  static constexpr int64_t kReduceWholeBytes = 16 << 10;
  // The window's data area per rank: two halves.
  static constexpr size_t kWindowBytes = 2 * size_t(kHalfBytes);

  // `step`: the communicator's step counter (the same on every rank), advanced
  // by every step.
  AllreduceShm(ShmWindow& window, int64_t& step, std::span<Op> ops, const BackoffPolicy& policy);

  // `step_started(first, end)` (may be empty) is called as each step starts,
  // with the ops [first, end) it packs; ops before `first` are complete. The
  // communicator tells its watchdog which collective of the group the rank
  // is in now, and when each one started (not when the group did).
  void run(const std::function<void(size_t, size_t)>& step_started = {});

 private:
  // Where a piece of the step sits: op `op`, bytes [offset, offset + length)
  // of it, at `at` bytes into the step's half.
  struct Placed {
    size_t op = 0;
    int64_t offset = 0, length = 0, at = 0;
  };

  // The pieces of the next step from op `next`, byte `offset` of it.
  void plan(size_t next, int64_t offset);
  void copy_in(std::byte* half) const;
  // Waits for every rank's arrival; returns how many pieces the step covers.
  size_t agree(int64_t e);
  int64_t step_bytes(size_t pieces) const;
  void reduce_whole(int64_t e, size_t pieces);
  void reduce_slice(int64_t e, size_t pieces);
  void gather(int64_t e, size_t pieces);
  // Copies [from, to) bytes of the step's layout from `src` (laid out like a
  // half) into the ops' buffers.
  void scatter(const std::byte* src, int64_t from, int64_t to, size_t pieces) const;
  // Rank `rank`'s slice (bytes, whole cache lines) of a step of `bytes` bytes.
  std::pair<int64_t, int64_t> slice(int rank, int64_t bytes) const;
  // Until every rank's `counter` reaches e; `check`: also compare what the
  // peers announced with the step's first all-reduce.
  void wait_all(ShmWindow::Counter ShmWindow::Control::*counter, int64_t e, bool check) const;

  ShmWindow& w_;
  int64_t& step_;
  std::span<Op> ops_;
  BackoffPolicy policy_;
  std::array<Placed, ShmWindow::kMaxPieces> placed_;
  size_t planned_ = 0;  // pieces this rank packed into the step
  std::vector<const void*> sources_;
};

}  // namespace shardtrain::comm
