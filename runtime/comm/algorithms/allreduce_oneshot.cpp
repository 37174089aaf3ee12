#include "runtime/comm/algorithms/allreduce_oneshot.h"

#include "runtime/comm/algorithms/reduction.h"
#include "runtime/comm/algorithms/ring_layout.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cstring>

namespace shardtrain::comm {
namespace {

constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

// Past kWholeRestBytes fragment 0 stays the shared-memory size on every
// transport: it only has to carry the header ahead of the whole rest, and a
// 64 KiB one made those sizes slower across nodes (docs/BENCHMARKS.md, "The
// one-shot all-reduce's messages at TCP's eager size").
int64_t AllreduceOneshot::piece_bytes(int64_t bytes) const {
  return bytes > kWholeRestBytes ? kFragmentBytes : fragment_bytes_;
}

int64_t AllreduceOneshot::fragments(int64_t bytes) const {
  const int64_t total = int64_t(sizeof(Header)) + bytes;
  if (bytes > kWholeRestBytes) return 2;
  return (total + piece_bytes(bytes) - 1) / piece_bytes(bytes);
}

int64_t AllreduceOneshot::fragment_offset(int64_t bytes, int64_t f) const { return f * piece_bytes(bytes); }

int64_t AllreduceOneshot::fragment_size(int64_t bytes, int64_t f) const {
  const int64_t total = int64_t(sizeof(Header)) + bytes;
  if (f == fragments(bytes) - 1) return total - fragment_offset(bytes, f);  // the last takes the rest
  return piece_bytes(bytes);
}

AllreduceOneshot::AllreduceOneshot(MpiTransport& transport, std::span<Op> ops, Scratch& scratch, Workspace& workspace,
                                   int64_t fragment_bytes)
    : t_(transport), ops_(ops), w_(workspace), fragment_bytes_(fragment_bytes) {
  ST_ASSERT(fragment_bytes_ > int64_t(sizeof(Header)));
  // Lay out every op's receive areas (one per peer) and staged fragment 0.
  const size_t peers = size_t(t_.size() - 1);
  size_t recv_bytes = 0, send_bytes = 0, requests = 0;
  w_.slots.resize(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) {
    const int64_t bytes = ops_[i].numel * int64_t(dtype_size(ops_[i].dtype));
    Slot& s = w_.slots[i];
    s.recv_stride = round_up(sizeof(Header) + size_t(bytes), 64);
    s.recv_offset = recv_bytes;
    s.send_offset = send_bytes;
    s.receives = peers * size_t(fragments(bytes));
    s.first_request = requests;
    recv_bytes += peers * s.recv_stride;
    send_bytes += round_up(size_t(fragment_size(bytes, 0)), 64);
    requests += 2 * s.receives;
  }
  recv_ = scratch.get(kOneshotRecv, recv_bytes);
  send_ = scratch.get(kOneshotSend, send_bytes);
  w_.requests.resize(requests);
  w_.sources.resize(size_t(t_.size()));
}

AllreduceOneshot::Header AllreduceOneshot::header_of(const Op& op) {
  return oneshot_header(OneshotOp::allreduce, op.seq, op.numel * int64_t(dtype_size(op.dtype)), op.dtype, op.scale);
}

// Peer k's [Header | data] area of op i (k counts the other ranks, in rank order).
std::byte* AllreduceOneshot::area(size_t i, int peer_index) const {
  const Slot& s = w_.slots[i];
  return recv_ + s.recv_offset + size_t(peer_index) * s.recv_stride;
}

void AllreduceOneshot::post() {
  const int p = t_.size(), me = t_.rank();
  auto peer_of = [me](int k) { return k < me ? k : k + 1; };
  // Receives of every op first: a peer's messages then find their receive
  // already posted and land in place, not in MPI's unexpected-message queue.
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    const Slot& s = w_.slots[i];
    const int64_t bytes = op.numel * int64_t(dtype_size(op.dtype)), n = fragments(bytes);
    const int first_tag = t_.tag(op.seq, kTagArrival), rest_tag = t_.tag(op.seq, kTagOneshot);
    for (int k = 0; k < p - 1; ++k)
      for (int64_t f = 0; f < n; ++f)
        t_.irecv(w_.requests[s.first_request + size_t(k * n + f)], area(i, k) + fragment_offset(bytes, f),
                 fragment_size(bytes, f), peer_of(k), f == 0 ? first_tag : rest_tag);
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    const Slot& s = w_.slots[i];
    const int64_t bytes = op.numel * int64_t(dtype_size(op.dtype)), n = fragments(bytes);
    const int first_tag = t_.tag(op.seq, kTagArrival), rest_tag = t_.tag(op.seq, kTagOneshot);
    // Fragment 0: the header and the first bytes of data, staged.
    std::byte* staged = send_ + s.send_offset;
    const Header h = header_of(op);
    std::memcpy(staged, &h, sizeof(Header));
    const int64_t first = fragment_size(bytes, 0);
    if (first > int64_t(sizeof(Header))) std::memcpy(staged + sizeof(Header), op.buf, size_t(first) - sizeof(Header));
    const auto* data = static_cast<const std::byte*>(op.buf);
    auto piece = [&](int64_t f) {
      return f == 0 ? staged : data + (fragment_offset(bytes, f) - int64_t(sizeof(Header)));
    };
    // To the right neighbour first, as in a ring: every rank's first message
    // goes to a different peer.
    for (int d = 1; d < p; ++d) {
      const int peer = (me + d) % p, k = peer < me ? peer : peer - 1;
      for (int64_t f = 0; f < n; ++f)
        t_.isend(w_.requests[s.first_request + s.receives + size_t(k * n + f)], piece(f), fragment_size(bytes, f), peer,
                 f == 0 ? first_tag : rest_tag);
    }
  }
}

void AllreduceOneshot::finish(size_t i) {
  Op& op = ops_[i];
  const Slot& s = w_.slots[i];
  const int p = t_.size(), me = t_.rank();
  const int64_t n = fragments(op.numel * int64_t(dtype_size(op.dtype)));
  std::span<MpiTransport::Request> receives(w_.requests.data() + s.first_request, s.receives);
  std::span<MpiTransport::Request> sends(w_.requests.data() + s.first_request + s.receives, s.receives);

  // 1. Every peer's header, checked before anything is added.
  for (int k = 0; k < p - 1; ++k) t_.wait(receives[size_t(k * n)]);
  op.arrived_at = now_seconds();
  for (int k = 0; k < p - 1; ++k) {
    Header theirs;
    std::memcpy(&theirs, area(i, k), sizeof(Header));
    check_oneshot_header(header_of(op), theirs, k < me ? k : k + 1);
  }

  // 2. The rest of the peers' data, and this rank's sends (its buffer is
  // about to be overwritten with the result).
  t_.wait_all(receives);
  t_.wait_all(sends);

  // 3. The p buffers added in rank order, the average's scale in the last
  // addition: the same bits on every rank.
  for (int r = 0; r < p; ++r) w_.sources[size_t(r)] = r == me ? op.buf : area(i, r < me ? r : r - 1) + sizeof(Header);
  reduce_sum_ordered(op.dtype, op.buf, w_.sources.data(), p, op.numel, op.scale);
}

}  // namespace shardtrain::comm
