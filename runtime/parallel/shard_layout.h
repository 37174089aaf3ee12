// How FSDP splits the model's flat parameters across the ranks of a shard
// group: each Block's range of the flat buffer is padded to world * chunk
// elements (chunk a multiple of 16 elements, 64 bytes) and split evenly; rank
// r owns elements [r * chunk, (r + 1) * chunk) of every Block's padded range.
// A rank's shard is the concatenation of its chunks, Block after Block: its
// local buffer holds `shard_numel()` elements. Pure arithmetic, no buffers.
#pragma once

#include "runtime/nn/flat_parameters.h"
#include "runtime/optim/optimizer.h"

#include <cstdint>
#include <vector>

namespace shardtrain::parallel {

struct BlockShard {
  int64_t flat_offset = 0;   // first element of the Block in the model's flat buffer
  int64_t numel = 0;         // the Block's elements in the flat buffer (unpadded)
  int64_t chunk = 0;         // elements per rank; padded numel = world * chunk
  int64_t local_offset = 0;  // where this Block's chunk starts in a rank's shard buffer
  int64_t padded() const { return chunk; }
};

class ShardLayout {
 public:
  static constexpr int64_t kChunkAlign = nn::FlatParameters::kAlignElems;

  ShardLayout(const std::vector<nn::BlockRange>& blocks, int world);

  int world() const { return world_; }
  const std::vector<BlockShard>& blocks() const { return blocks_; }
  const BlockShard& block(int b) const { return blocks_[size_t(b)]; }
  int64_t padded_numel(int b) const { return block(b).chunk * world_; }
  // Elements of every rank's shard buffer (the same on every rank).
  int64_t shard_numel() const { return shard_numel_; }
  // The largest padded Block: the size of a gather buffer.
  int64_t max_padded_numel() const { return max_padded_; }

  // The flat-buffer elements rank r owns in Block b: [begin, end), possibly
  // empty (the rank's whole chunk is padding); chunk element i is flat
  // element flat_offset + r * chunk + i.
  struct Owned {
    int64_t begin = 0, end = 0;
  };
  Owned owned(int b, int rank) const;

  // The optimizer ranges of rank r's shard buffer: `full` (ranges of the
  // model's flat buffer, e.g. train::optimizer_ranges) cut at the owned
  // chunks and moved to shard-local offsets; weight decay is kept per piece,
  // a chunk cutting through a parameter gives two pieces.
  std::vector<optim::ParamRange> shard_ranges(const std::vector<optim::ParamRange>& full, int rank) const;

 private:
  int world_ = 1;
  std::vector<BlockShard> blocks_;
  int64_t shard_numel_ = 0, max_padded_ = 0;
};

}  // namespace shardtrain::parallel
