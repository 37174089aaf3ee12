// What the storage gave a streamed run: the data set's size against the
// memory the page cache could use (the cgroup's limit or the node's), the
// bytes the loader asked for and the bytes that came from storage, and from
// those the page cache's hit ratio (result.json's "storage", one summary line).
#pragma once

#include "io/stream_loader.h"
#include "runtime/comm/communicator.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::train {

struct StorageFigures {
  double data_bytes = 0;      // the training split's shard files
  double memory_bytes = 0;    // what the page cache could hold: the limit, else the node's memory
  double limit_bytes = -1;    // the cgroup's memory limit (-1: none)
  std::string limit_file;     // where it is set
  double loader_bytes = 0;    // bytes the loaders read, all ranks
  double storage_bytes = -1;  // bytes that came from storage, all ranks (-1: not counted here)
  // io.peer_cache.dir, all ranks: copied from the shared store at start,
  // fetched from an object store before (an s3:// split), and of
  // loader_bytes, received from other nodes (the rest came from the node's
  // own copies).
  bool peer_cache = false;
  double staged_bytes = 0, fetched_bytes = 0, peer_bytes = 0;
  double hit_ratio() const;  // 1 - storage/loader, within [0, 1]; -1 when unknown
};

// Collective when `comm` is not null. `storage_bytes_at_start`: this rank's
// io::storage_read_bytes() when training began; `loader`: its loader's figures.
StorageFigures measure_storage(comm::Communicator* comm, const std::vector<std::string>& shard_files,
                               int64_t storage_bytes_at_start, const io::LoaderStats& loader);

nlohmann::json to_json(const StorageFigures& f);
std::string storage_line(const StorageFigures& f);

}  // namespace shardtrain::train
