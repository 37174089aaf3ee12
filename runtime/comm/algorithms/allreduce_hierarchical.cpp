#include "runtime/comm/algorithms/allreduce_hierarchical.h"

#include "runtime/comm/algorithms/allgather_ring.h"
#include "runtime/comm/algorithms/allreduce_ring.h"
#include "runtime/comm/algorithms/mpi_native.h"
#include "runtime/comm/algorithms/reduce_scatter_ring.h"
#include "runtime/comm/algorithms/ring_layout.h"

namespace shardtrain::comm {

AllreduceHierarchical::AllreduceHierarchical(MpiTransport& node, MpiTransport& cross, int64_t seq, DType dtype,
                                             void* buf, int64_t numel, float scale, const CommOptions& options,
                                             Scratch& scratch, bool poll_native)
    : node_(node),
      cross_(cross),
      seq_(seq),
      dtype_(dtype),
      buf_(buf),
      numel_(numel),
      scale_(scale),
      options_(options),
      scratch_(scratch),
      poll_native_(poll_native) {}

void AllreduceHierarchical::run() {
  const size_t elem = dtype_size(dtype_);
  const RingLayout layout(numel_, node_.size(), options_.chunk_bytes / int64_t(elem));
  const Range mine = layout.segment(node_.rank());
  std::byte* shard = static_cast<std::byte*>(buf_) + size_t(mine.offset) * elem;

  // 1. Within the node: this rank ends with the node's sum of its segment.
  ReduceScatterRing(node_, layout, dtype_, node_.tag(seq_, kTagHierarchicalReduceScatter), buf_, shard, 1.0f,
                    /*in_place=*/true, scratch_)
      .run();

  // 2. Across nodes, on this rank's segment only (the average's scale here).
  if (int64_t(mine.count * int64_t(elem)) <= options_.small_message_bytes)
    MpiNative(cross_.comm(), poll_native_ ? &cross_.policy() : nullptr).allreduce(shard, mine.count, dtype_, scale_);
  else
    AllreduceRing(cross_, seq_, dtype_, shard, mine.count, scale_, options_.chunk_bytes, scratch_).run();

  // 3. Within the node: every segment to every rank of the node.
  AllgatherRing(node_, layout, elem, node_.tag(seq_, kTagHierarchicalAllgather), buf_).run();
}

}  // namespace shardtrain::comm
