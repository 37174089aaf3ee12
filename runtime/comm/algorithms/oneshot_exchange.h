// The exchange under the one-shot reduce-scatter and all-gather: every rank
// sends one message, [OneshotHeader | data], to every other rank and
// receives one from each, all posted at once. One message latency where a
// ring takes p-1 steps and an MPI collective log2(p) rounds behind its
// arrival check; and for these two collectives no more bytes than a ring,
// (p-1)/p of the buffer per rank, so only the number of messages in flight
// (p-1 each way) limits the sizes it pays for.
//
// Use: write each peer's data at outgoing(peer) (or once, at outgoing(),
// where every peer gets the same), start(), then finish(): it waits for the
// headers, checks them all (oneshot_header.h) before anything is used, then
// waits for the rest; incoming(peer) is that peer's data. Messages go out to
// the right neighbour first, as in a ring, so that every rank's first message
// goes to a different peer. The first message of a one-shot carries the tag
// of an MPI collective's arrival check: ranks that disagree on the algorithm
// receive messages of the wrong size and fail at once.
#pragma once

#include "runtime/comm/algorithms/oneshot_header.h"
#include "runtime/comm/engine/scratch.h"
#include "runtime/comm/transport/mpi_transport.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardtrain::comm {

class OneshotExchange {
 public:
  // `bytes` of data per message. `same_for_all`: one outgoing message, sent
  // to every peer (all-gather); else one per peer (reduce-scatter).
  // `requests` is the communicator's, reused from one collective to the next.
  OneshotExchange(MpiTransport& transport, const OneshotHeader& header, int64_t bytes, bool same_for_all,
                  Scratch& scratch, std::vector<MpiTransport::Request>& requests);

  std::byte* outgoing(int peer = -1) const;
  void start();
  // Returns when every peer's header had arrived (Work::mark_arrived).
  double finish();
  const std::byte* incoming(int peer) const;

 private:
  // Peers counted without this rank: 0 .. p-2, in rank order.
  int index_of(int peer) const { return peer < t_.rank() ? peer : peer - 1; }
  size_t stride() const;

  MpiTransport& t_;
  OneshotHeader header_;
  int64_t bytes_;
  bool same_for_all_;
  std::vector<MpiTransport::Request>& requests_;
  std::byte* recv_ = nullptr;
  std::byte* send_ = nullptr;
};

}  // namespace shardtrain::comm
