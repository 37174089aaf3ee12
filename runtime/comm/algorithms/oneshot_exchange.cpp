#include "runtime/comm/algorithms/oneshot_exchange.h"

#include "runtime/comm/algorithms/ring_layout.h"
#include "runtime/core/clock.h"

#include <cstring>
#include <span>

namespace shardtrain::comm {

OneshotExchange::OneshotExchange(MpiTransport& transport, const OneshotHeader& header, int64_t bytes, bool same_for_all,
                                 Scratch& scratch, std::vector<MpiTransport::Request>& requests)
    : t_(transport), header_(header), bytes_(bytes), same_for_all_(same_for_all), requests_(requests) {
  const size_t peers = size_t(t_.size() - 1);
  recv_ = scratch.get(kOneshotRecv, peers * stride());
  send_ = scratch.get(kOneshotSend, (same_for_all_ ? 1 : peers) * stride());
  requests_.resize(2 * peers);
  // The headers of the outgoing messages are written once, here.
  for (size_t k = 0; k < (same_for_all_ ? 1 : peers); ++k) std::memcpy(send_ + k * stride(), &header_, sizeof header_);
}

// [Header | data], rounded up to a cache line so that no two areas share one.
size_t OneshotExchange::stride() const { return (sizeof(OneshotHeader) + size_t(bytes_) + 63) / 64 * 64; }

std::byte* OneshotExchange::outgoing(int peer) const {
  const size_t k = same_for_all_ ? 0 : size_t(index_of(peer));
  return send_ + k * stride() + sizeof(OneshotHeader);
}

const std::byte* OneshotExchange::incoming(int peer) const {
  return recv_ + size_t(index_of(peer)) * stride() + sizeof(OneshotHeader);
}

void OneshotExchange::start() {
  const int p = t_.size(), me = t_.rank();
  const int tag = t_.tag(header_.seq, kTagArrival);
  const int64_t message = int64_t(sizeof(OneshotHeader)) + bytes_;
  // Receives first: a peer's message then finds its receive posted and lands
  // in place, not in MPI's queue of unexpected messages.
  for (int d = 1; d < p; ++d) {
    const int peer = ring_mod(me - d, p);
    t_.irecv(requests_[size_t(index_of(peer))], recv_ + size_t(index_of(peer)) * stride(), message, peer, tag);
  }
  const size_t first_send = size_t(p) - 1;  // the receives' requests come first
  for (int d = 1; d < p; ++d) {
    const int peer = ring_mod(me + d, p);
    t_.isend(requests_[first_send + size_t(index_of(peer))], outgoing(peer) - sizeof(OneshotHeader), message, peer,
             tag);
  }
}

double OneshotExchange::finish() {
  const int p = t_.size();
  std::span<MpiTransport::Request> receives(requests_.data(), size_t(p - 1));
  std::span<MpiTransport::Request> sends(requests_.data() + p - 1, size_t(p - 1));
  // A message is its header and data together: once every receive is
  // complete, every header is there. Checked before any data is used.
  t_.wait_all(receives);
  const double arrived_at = now_seconds();
  for (int peer = 0; peer < p; ++peer) {
    if (peer == t_.rank()) continue;
    OneshotHeader theirs;
    std::memcpy(&theirs, incoming(peer) - sizeof(OneshotHeader), sizeof theirs);
    check_oneshot_header(header_, theirs, peer);
  }
  t_.wait_all(sends);
  return arrived_at;
}

}  // namespace shardtrain::comm
