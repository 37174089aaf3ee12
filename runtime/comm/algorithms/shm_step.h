// One step of a reduce-scatter or an all-gather in a ShmWindow (one buffer,
// no packing): step e uses half e % 2 of each rank's data area, and a rank
// writes its half again only once every rank has read step e-2's from it
// (the pacing AllreduceShm uses, which these share the step counter with).
//
//   ShmStep s(window, step, seq, op, policy);  // advances the step counter
//   s.wait_free();             // the half may be written
//   memcpy(s.half(rank), ...); // this rank's data in
//   s.arrive(piece);           // descriptors, arrival, every rank's, compared
//   ... read s.half(r) of every rank ...
//   s.done();
#pragma once

#include "runtime/comm/algorithms/allreduce_shm.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/transport/shm_window.h"
#include "runtime/comm/watchdog/comm_monitor.h"

#include <cstddef>
#include <cstdint>

namespace shardtrain::comm {

class ShmStep {
 public:
  // The bytes of a half: the window's layout is AllreduceShm's.
  static constexpr int64_t kHalfBytes = AllreduceShm::kHalfBytes;

  ShmStep(ShmWindow& window, int64_t& step, int64_t seq, OpCode op, const BackoffPolicy& policy);

  std::byte* half(int rank) const;
  // Until every rank has read what step e-2 put in this rank's half.
  void wait_free() const;
  // Publishes this rank's piece of the step, then its arrival; waits for
  // every rank's and throws, naming both, where some rank's piece differs
  // (another collective, size, dtype or scale). Returns the time the last
  // rank had arrived by.
  double arrive(const ShmWindow::Piece& piece);
  // This rank has read every half of the step it needs.
  void done();

 private:
  ShmWindow& w_;
  int64_t e_, seq_;
  OpCode op_;
  BackoffPolicy policy_;
};

}  // namespace shardtrain::comm
