#include "runtime/comm/algorithms/allreduce_ring.h"

#include "runtime/comm/algorithms/allgather_ring.h"
#include "runtime/comm/algorithms/reduce_scatter_ring.h"
#include "runtime/comm/algorithms/ring_layout.h"

namespace shardtrain::comm {

AllreduceRing::AllreduceRing(MpiTransport& transport, int64_t seq, DType dtype, void* buf, int64_t numel, float scale,
                             int64_t chunk_bytes, Scratch& scratch)
    : t_(transport),
      seq_(seq),
      dtype_(dtype),
      buf_(buf),
      numel_(numel),
      scale_(scale),
      chunk_elems_(chunk_bytes / int64_t(dtype_size(dtype))),
      scratch_(scratch) {}

void AllreduceRing::run() {
  const RingLayout layout(numel_, t_.size(), chunk_elems_);
  const size_t elem = dtype_size(dtype_);
  auto* own = static_cast<std::byte*>(buf_) + size_t(layout.segment(t_.rank()).offset) * elem;

  // Phase 1, reduce-scatter: this rank ends with the whole (scaled) sum of its
  // own segment, written in place.
  ReduceScatterRing(t_, layout, dtype_, t_.tag(seq_, kTagAllreduceReduceScatter), buf_, own, scale_,
                    /*in_place=*/true, scratch_)
      .run();

  // Phase 2, all-gather: every owner's segment to every rank. Its receives
  // overwrite segments whose reduce-scatter sends have completed (run()
  // returns only once they have).
  AllgatherRing(t_, layout, elem, t_.tag(seq_, kTagAllreduceAllgather), buf_).run();
}

}  // namespace shardtrain::comm
