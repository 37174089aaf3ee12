#include "runtime/parallel/pieces.h"

namespace shardtrain::parallel {

Pieces whole_buffer(int64_t numel) { return numel > 0 ? Pieces{{0, numel, 0}} : Pieces{}; }

Pieces replicated_slice(int64_t numel, int rank, int world) {
  const int64_t begin = numel * rank / world, end = numel * (rank + 1) / world;
  return end > begin ? Pieces{{begin, end, begin}} : Pieces{};
}

Pieces fsdp_shard(const ShardLayout& layout, int rank) {
  Pieces out;
  for (int b = 0; b < int(layout.blocks().size()); ++b) {
    const ShardLayout::Owned o = layout.owned(b, rank);
    if (o.end <= o.begin) continue;
    const BlockShard& s = layout.block(b);
    // Chunk element i is flat element flat_offset + rank * chunk + i.
    out.push_back({o.begin, o.end, s.local_offset + (o.begin - (s.flat_offset + rank * s.chunk))});
  }
  return out;
}

int64_t total_numel(const Pieces& pieces) {
  int64_t n = 0;
  for (const Piece& p : pieces) n += p.numel();
  return n;
}

}  // namespace shardtrain::parallel
