#include "runtime/comm/transport/arrival_barrier.h"

#include "runtime/comm/algorithms/ring_layout.h"
#include "runtime/core/error.h"

namespace shardtrain::comm {

ArrivalBarrier::ArrivalBarrier(MpiTransport& transport, const OpRecord& op)
    : t_(transport), seq_(op.seq), tag_(transport.tag(op.seq, kTagArrival)) {
  mine_.bytes = op.bytes;
  mine_.root = op.root;
  mine_.op = uint8_t(op.op);
  mine_.dtype = uint8_t(op.dtype);
  while ((1 << rounds_) < t_.size()) ++rounds_;
  if (rounds_ > 0) post_round();
}

// Round k: tell rank r + 2^k, hear from rank r - 2^k. After the last round
// every rank has heard, directly or not, from every other.
void ArrivalBarrier::post_round() {
  const int p = t_.size(), r = t_.rank(), distance = 1 << round_;
  t_.isend(send_, &mine_, sizeof(Signal), ring_mod(r + distance, p), tag_);
  t_.irecv(recv_, &theirs_, sizeof(Signal), ring_mod(r - distance, p), tag_);
}

bool ArrivalBarrier::progress() {
  while (round_ < rounds_) {
    if (!t_.test(recv_) || !t_.test(send_)) return false;
    // Both messages are done: mine_ may change for the next round.
    const bool differs = theirs_.bytes != mine_.bytes || theirs_.root != mine_.root || theirs_.op != mine_.op ||
                         theirs_.dtype != mine_.dtype;
    mine_.mismatch |= uint8_t(differs || theirs_.mismatch);
    if (++round_ < rounds_) post_round();
  }
  return true;
}

void ArrivalBarrier::wait() {
  Backoff backoff(t_.policy());
  while (!progress()) backoff.idle();
  if (mine_.mismatch)
    throw Error(
        fmt::format("the ranks issued different collectives as #{} (caught before MPI's collective ran)", seq_));
}

}  // namespace shardtrain::comm
