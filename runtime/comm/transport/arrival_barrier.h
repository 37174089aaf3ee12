// The check before every MPI-library collective: a dissemination barrier over
// the transport (ceil(log2 p) rounds of 24-byte messages, polled with the
// transport's Backoff) that also compares what each rank is about to run.
//
// Why arrive first: Open MPI's blocking collectives spin at 100% of a core
// until every rank has arrived. A rank a few milliseconds late (still in its
// backward pass, say) would have its peers' progress threads burn the cores
// its own compute thread needs. Measured here, 2 ranks, one 300 ms late: the
// waiting rank spent 300 ms of CPU inside MPI_Allreduce, ~20 ms (6%) waiting
// in this barrier instead.
//
// Why compare: MPI's collectives called with different sizes on different
// ranks are undefined, and Open MPI 4.1's ring all-reduce then writes past
// its buffers (AddressSanitizer caught an 8 KiB write into a 4 KiB buffer,
// 3 ranks, one issuing twice the size). Each rank sends its collective's
// signature (op, bytes, dtype, root) and whether it has seen a difference
// yet; round 0 compares every pair of ring neighbours, so any difference is
// seen by some rank, and the flag reaches every rank by the last round: then
// no rank enters the MPI collective, and each fails with an Error.
//
// Cost: ~0.3-0.5 us per collective issued back to back (the engine posts the
// barriers of the next collectives while one runs), a message latency when
// collectives come one at a time.
#pragma once

#include "runtime/comm/watchdog/comm_monitor.h"
#include "runtime/comm/transport/mpi_transport.h"

#include <cstdint>

namespace shardtrain::comm {

class ArrivalBarrier {
 public:
  ArrivalBarrier(MpiTransport& transport, const OpRecord& op);
  ArrivalBarrier(const ArrivalBarrier&) = delete;
  ArrivalBarrier& operator=(const ArrivalBarrier&) = delete;

  int64_t seq() const { return seq_; }
  // Advances the rounds whose messages have arrived; true once every rank
  // has arrived.
  bool progress();
  // Until every rank has arrived; throws if some rank's collective differs.
  void wait();

 private:
  struct Signal {
    int64_t bytes = 0;
    int32_t root = -1;
    uint8_t op = 0, dtype = 0, mismatch = 0, pad = 0;
    int64_t reserved = 0;
  };
  void post_round();

  MpiTransport& t_;
  int64_t seq_;
  int tag_;
  int round_ = 0, rounds_ = 0;
  MpiTransport::Request send_, recv_;
  Signal mine_, theirs_;
};

}  // namespace shardtrain::comm
