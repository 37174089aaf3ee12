// Shared memory among the ranks of a communicator that all live on one node:
// the transport of AllreduceShm. Each rank owns a region of one MPI shared
// window (MPI_Win_allocate_shared, so the MPI library sets up and cleans up
// the mapping): a control block of counters and descriptors, then its data
// area. A rank writes only its own region; it reads every rank's. Counters
// are std::atomic in the shared mapping (lock-free, so address-free: they
// work across processes); the algorithms wait for them with the engine's
// Backoff, like every other wait. AllreduceShm, ReduceScatterShm and
// AllgatherShm run in it, one step counter per communicator among them.
//
// The control block also carries what collective the rank's engine runs now
// (announce): a rank waiting in shared memory for a peer that is running
// another collective as the same sequence number sees it at once and fails,
// as the arrival check and the one-shot's headers do for MPI's collectives.
#pragma once

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/watchdog/comm_monitor.h"

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace shardtrain::comm {

class ShmWindow {
 public:
  // One piece of a step of a collective in the window: `length` bytes at
  // `offset` of collective #seq (`op`), which has `bytes` bytes of `dtype`,
  // scaled by `scale`.
  struct Piece {
    int64_t seq = 0, bytes = 0, offset = 0, length = 0;
    float scale = 1.0f;
    uint8_t dtype = 0, op = 0, pad[2] = {};
    bool operator==(const Piece&) const = default;
  };
  static constexpr int kMaxPieces = 32;

  struct alignas(64) Counter {
    std::atomic<int64_t> value{0};
  };
  struct Control {
    Counter arrived, reduced, done;  // the last step this rank reached each point of
    Counter entered;                 // signature() of the collective its engine runs
    // The pieces of step e at [e % 2], written before `arrived`: a peer may
    // still read step e-1's while this rank writes step e's.
    int32_t pieces[2] = {};
    Piece piece[2][kMaxPieces];
  };

  // Collective over `comm`. Null when its ranks do not all share memory (or
  // the MPI library cannot allocate a shared window): callers then use
  // point-to-point algorithms. `data_bytes`: each rank's data area.
  static std::unique_ptr<ShmWindow> create(MPI_Comm comm, size_t data_bytes);
  // Frees the window: collective, like creating it.
  ~ShmWindow();
  ShmWindow(const ShmWindow&) = delete;
  ShmWindow& operator=(const ShmWindow&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t data_bytes() const { return data_bytes_; }
  Control& control(int rank) const { return *controls_[size_t(rank)]; }
  std::byte* data(int rank) const { return data_[size_t(rank)]; }

  // What collective this rank's engine is about to run (`algorithm_shm`:
  // whether it runs in this window), for peers to compare with theirs.
  static uint64_t signature(int64_t seq, OpCode op, bool algorithm_shm);
  void announce(uint64_t signature) {
    control(rank_).entered.value.store(int64_t(signature), std::memory_order_release);
  }
  // Throws if some peer has announced collective #seq differently from `mine`.
  void check_peers(int64_t seq, uint64_t mine) const;
  // Until every rank's `counter` reaches `e`, waiting with `policy`'s
  // backoff; with a `signature` (not 0), also failing on a peer that
  // announced collective #seq differently (check_peers).
  void wait_all(Counter Control::*counter, int64_t e, const BackoffPolicy& policy, int64_t seq = 0,
                uint64_t signature = 0) const;

 private:
  ShmWindow() = default;

  MPI_Win win_ = MPI_WIN_NULL;
  int rank_ = 0, size_ = 1;
  size_t data_bytes_ = 0;
  std::unique_ptr<Control*[]> controls_;
  std::unique_ptr<std::byte*[]> data_;
};

}  // namespace shardtrain::comm
