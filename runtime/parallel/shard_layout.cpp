#include "runtime/parallel/shard_layout.h"

#include "runtime/core/error.h"

#include <algorithm>

namespace shardtrain::parallel {

ShardLayout::ShardLayout(const std::vector<nn::BlockRange>& blocks, int world) : world_(world) {
  ST_CHECK(world >= 1, "FSDP: a shard group of {} ranks", world);
  for (const nn::BlockRange& r : blocks) {
    BlockShard s;
    s.flat_offset = r.offset;
    s.numel = r.numel;
    const int64_t per_rank = (r.numel + world - 1) / world;
    s.chunk = (per_rank + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
    s.local_offset = shard_numel_;
    shard_numel_ += s.chunk;
    max_padded_ = std::max(max_padded_, s.chunk * world);
    blocks_.push_back(s);
  }
}

ShardLayout::Owned ShardLayout::owned(int b, int rank) const {
  const BlockShard& s = block(b);
  const int64_t begin = std::min(s.numel, rank * s.chunk), end = std::min(s.numel, (rank + 1) * s.chunk);
  return {s.flat_offset + begin, s.flat_offset + end};
}

std::vector<optim::ParamRange> ShardLayout::shard_ranges(const std::vector<optim::ParamRange>& full, int rank) const {
  std::vector<optim::ParamRange> out;
  for (int b = 0; b < int(blocks_.size()); ++b) {
    const BlockShard& s = blocks_[size_t(b)];
    const Owned o = owned(b, rank);
    // Chunk element i is flat element flat_offset + rank * chunk + i.
    optim::append_ranges_within(full, o.begin, o.end, s.local_offset + (o.begin - (s.flat_offset + rank * s.chunk)),
                                out);
  }
  return out;
}

}  // namespace shardtrain::parallel
