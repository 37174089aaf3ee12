#include "runtime/comm/algorithms/allgather_ring.h"

#include "runtime/core/error.h"

#include <cstring>
#include <vector>

namespace shardtrain::comm {

AllgatherRing::AllgatherRing(MpiTransport& transport, const RingLayout& layout, size_t elem_bytes, int tag, void* buf,
                             const void* own)
    : t_(transport),
      layout_(layout),
      elem_(elem_bytes),
      tag_(tag),
      rank_(transport.rank()),
      buf_(static_cast<std::byte*>(buf)),
      own_(static_cast<const std::byte*>(own)) {
  ST_ASSERT(layout.ranks() == transport.size());
}

void AllgatherRing::run() {
  const int p = layout_.ranks();
  const Range mine = layout_.segment(rank_);
  std::byte* mine_in_buf = buf_ + size_t(mine.offset) * elem_;
  auto place_own = [&] {
    if (own_ && own_ != mine_in_buf && mine.count > 0) std::memcpy(mine_in_buf, own_, size_t(mine.count) * elem_);
  };
  if (p == 1) {
    place_own();
    return;
  }
  const int left = ring_mod(rank_ - 1, p), right = ring_mod(rank_ + 1, p);
  const int64_t chunks = layout_.chunks(), units = (p - 1) * chunks;
  std::vector<MpiTransport::Request> sends(static_cast<size_t>(units)), recvs(static_cast<size_t>(units));
  int64_t recvs_posted = 0, sends_posted = 0;
  auto bytes_at = [&](int seg, int64_t c, int64_t& count) {
    const Range ch = layout_.chunk(seg, c);
    count = ch.count * int64_t(elem_);
    return buf_ + size_t(ch.offset) * elem_;
  };

  for (int64_t u = 0; u < units; ++u) {
    // Post ahead: receives (in place), and sends of chunks this rank holds:
    // its own segment at step 0, what arrived at step s-1 after that (unit
    // v - chunks, received once every unit < u is).
    for (; recvs_posted < std::min(units, u + kDepth); ++recvs_posted) {
      const int64_t v = recvs_posted;
      int64_t count = 0;
      std::byte* dst = bytes_at(recv_segment(v / chunks), v % chunks, count);
      t_.irecv(recvs[size_t(v)], dst, count, left, tag_);
    }
    for (; sends_posted < std::min(units, u + kDepth) && (sends_posted < chunks || sends_posted - chunks < u);
         ++sends_posted) {
      const int64_t v = sends_posted;
      int64_t count = 0;
      const std::byte* src = bytes_at(send_segment(v / chunks), v % chunks, count);
      if (v < chunks && own_) src = own_ + (src - mine_in_buf);  // step 0 sends the input
      t_.isend(sends[size_t(v)], src, count, right, tag_);
    }
    if (u == 0) place_own();  // while the first chunks move
    t_.wait(recvs[size_t(u)]);
  }
  t_.wait_all(sends);
}

}  // namespace shardtrain::comm
