// Where a rank's local buffers sit in the model's flat coordinates.
//
// A checkpoint stores every tensor (parameters, each optimizer state buffer)
// as one dataset in the coordinates of the model's flat parameter buffer,
// whatever the strategy that wrote it. A rank's local buffer is either the
// whole flat buffer (no sharding, DDP) or its FSDP shard; a Piece maps one run
// of that buffer onto the flat coordinates. Saving writes each rank's pieces,
// loading reads the pieces of the *current* layout: that is what makes a
// checkpoint load at another world size or strategy.
#pragma once

#include "runtime/parallel/shard_layout.h"

#include <cstdint>
#include <vector>

namespace shardtrain::parallel {

struct Piece {
  int64_t flat_begin = 0, flat_end = 0;  // [begin, end) of the flat buffer
  int64_t local_offset = 0;              // where flat_begin sits in the rank's buffer
  int64_t numel() const { return flat_end - flat_begin; }
};
using Pieces = std::vector<Piece>;

// A full (replicated) flat buffer of `numel` elements: every element, local
// offset = flat offset. What a DDP rank reads.
Pieces whole_buffer(int64_t numel);
// The rank's even slice of a replicated buffer: what a DDP rank writes, so
// that the ranks share the writing instead of rank 0 writing everything.
Pieces replicated_slice(int64_t numel, int rank, int world);
// The flat elements an FSDP rank owns (ShardLayout::owned), at their place in
// its shard buffer; a Block whose chunk is all padding gives no piece.
Pieces fsdp_shard(const ShardLayout& layout, int rank);

int64_t total_numel(const Pieces& pieces);

}  // namespace shardtrain::parallel
