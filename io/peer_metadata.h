// What the stream loader needs of a shard that is not on this node: its
// header, labels, per-sample checksums and where its samples lie. Under the
// peer cache over an s3:// split each node fetches only the shards it holds
// (io.peer_cache.dir), so another node's shard cannot be opened here; the
// node that holds it reads these once, and every rank receives them.
#pragma once

#include "io/sample_extents.h"
#include "io/shard_format.h"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace shardtrain::io {

struct ShardMetadata {
  shard_format::ShardHeader header;
  std::vector<int32_t> labels;
  std::vector<uint32_t> checksums;       // empty: samples not verified
  std::optional<SampleExtents> extents;  // absent: the read pool cannot read it
};

// Collective over `comm`: shard s's metadata is read by `read(s)` on rank
// `reader_of[s]` alone, and every rank returns every shard's. A read that
// throws on any rank throws its message on every rank, before anything moves.
std::vector<ShardMetadata> share_shard_metadata(MPI_Comm comm, const std::vector<int>& reader_of,
                                                const std::function<ShardMetadata(int)>& read);

// The byte form that travels (exposed for its test): pack and unpack are
// inverses; unpack checks that the bytes hold exactly whole records.
std::vector<uint8_t> pack_shard_metadata(const std::vector<std::pair<int, ShardMetadata>>& shards);
std::vector<std::pair<int, ShardMetadata>> unpack_shard_metadata(const uint8_t* data, size_t size);

}  // namespace shardtrain::io
