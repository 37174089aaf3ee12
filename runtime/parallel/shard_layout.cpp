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

std::vector<optim::ParamRange> ShardLayout::shard_ranges(const std::vector<optim::ParamRange>& full,
                                                         int rank) const {
  std::vector<optim::ParamRange> out;
  for (int b = 0; b < int(blocks_.size()); ++b) {
    const Owned o = owned(b, rank);
    const int64_t chunk_start = blocks_[size_t(b)].flat_offset + rank * blocks_[size_t(b)].chunk;
    for (const optim::ParamRange& r : full) {
      const int64_t lo = std::max(o.begin, r.offset), hi = std::min(o.end, r.offset + r.numel);
      if (lo >= hi) continue;
      const int64_t local = blocks_[size_t(b)].local_offset + (lo - chunk_start);
      if (!out.empty() && out.back().decay == r.decay && out.back().offset + out.back().numel == local)
        out.back().numel += hi - lo;
      else
        out.push_back({local, hi - lo, r.decay});
    }
  }
  return out;
}

}  // namespace shardtrain::parallel
