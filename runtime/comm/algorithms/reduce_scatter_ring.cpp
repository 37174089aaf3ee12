#include "runtime/comm/algorithms/reduce_scatter_ring.h"

#include "runtime/comm/algorithms/reduction.h"
#include "runtime/core/error.h"

#include <cstring>
#include <vector>

namespace shardtrain::comm {

ReduceScatterRing::ReduceScatterRing(MpiTransport& transport, const RingLayout& layout, DType dtype, int tag,
                                     const void* in, void* out, float scale, bool in_place, Scratch& scratch)
    : t_(transport),
      layout_(layout),
      dtype_(dtype),
      elem_(dtype_size(dtype)),
      tag_(tag),
      rank_(transport.rank()),
      in_(static_cast<const std::byte*>(in)),
      out_(static_cast<std::byte*>(out)),
      scale_(scale),
      in_place_(in_place),
      scratch_(scratch) {
  ST_ASSERT(layout.ranks() == transport.size());
  const int64_t largest_segment = layout.segment(0).count;  // segment 0 is never smaller
  const int64_t largest_chunk = layout.chunk_span();
  for (int i = 0; i < kDepth; ++i) staging_[i] = scratch.get(kStaging0 + i, size_t(largest_chunk) * elem_);
  if (!in_place && layout.ranks() > 2) {
    partials_[0] = scratch.get(kPartial0, size_t(largest_segment) * elem_);
    partials_[1] = scratch.get(kPartial1, size_t(largest_segment) * elem_);
  }
}

std::byte* ReduceScatterRing::partial(int64_t step, int seg, int64_t c) const {
  const Range chunk = layout_.chunk(seg, c);
  const int64_t within = chunk.offset - layout_.segment(seg).offset;
  if (step == layout_.ranks() - 2) return out_ + size_t(within) * elem_;  // seg == rank_: the result
  if (in_place_) return const_cast<std::byte*>(in_) + size_t(chunk.offset) * elem_;
  return partials_[step % 2] + size_t(within) * elem_;
}

void ReduceScatterRing::run() {
  const int p = layout_.ranks();
  if (p == 1) {  // nothing to exchange: out = in * scale
    const int64_t n = layout_.numel();
    if (out_ != in_) std::memcpy(out_, in_, size_t(n) * elem_);
    scale_inplace(dtype_, out_, n, scale_);
    return;
  }
  const int left = ring_mod(rank_ - 1, p), right = ring_mod(rank_ + 1, p);
  const int64_t chunks = layout_.chunks(), units = (p - 1) * chunks;
  std::vector<MpiTransport::Request> sends(static_cast<size_t>(units));
  MpiTransport::Request recvs[kDepth];
  int64_t recvs_posted = 0, sends_posted = 0;

  for (int64_t u = 0; u < units; ++u) {
    const int64_t step = u / chunks, c = u % chunks;

    // Post ahead: receives into free staging buffers, and every send whose
    // data is ready: step 0 sends raw input, step s the partial sums of step
    // s-1, ready once unit (v - chunks) has been added (all units < u have).
    for (; recvs_posted < std::min(units, u + kDepth); ++recvs_posted) {
      const int64_t v = recvs_posted;
      const Range ch = layout_.chunk(recv_segment(v / chunks), v % chunks);
      t_.irecv(recvs[v % kDepth], staging_[v % kDepth], ch.count * int64_t(elem_), left, tag_);
    }
    for (; sends_posted < std::min(units, u + kDepth) && (sends_posted < chunks || sends_posted - chunks < u);
         ++sends_posted) {
      const int64_t v = sends_posted, vs = v / chunks, vc = v % chunks;
      const int seg = send_segment(vs);
      const Range ch = layout_.chunk(seg, vc);
      const std::byte* src = vs == 0 ? in_ + size_t(ch.offset) * elem_ : partial(vs - 1, seg, vc);
      t_.isend(sends[size_t(v)], src, ch.count * int64_t(elem_), right, tag_);
    }

    // Receive chunk c of this step's segment and add this rank's input to it.
    t_.wait(recvs[u % kDepth]);
    const int seg = recv_segment(step);
    const Range ch = layout_.chunk(seg, c);
    std::byte* dst = partial(step, seg, c);
    // Out of place, the partial sums alternate between two buffers: the one
    // written now held step-2's sums, whose send (unit u - chunks) must be done.
    if (!in_place_ && step >= 2 && step < p - 2) t_.wait(sends[size_t(u - chunks)]);
    const float scale = step == p - 2 ? scale_ : 1.0f;
    reduce_sum(dtype_, dst, staging_[u % kDepth], in_ + size_t(ch.offset) * elem_, ch.count, scale);
  }
  t_.wait_all(sends);
}

}  // namespace shardtrain::comm
