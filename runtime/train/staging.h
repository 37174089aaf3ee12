// The trainer's side of cache staging ([io.stage], io/cache.h): one stager per
// node (its local rank 0) copies the training shards into the node-local
// cache while training runs; every rank tells the streaming loader where a
// shard's cached copy is. A rank that does not stage defers to its node's
// stager ("cached" yes), so the loader's agreement (a minimum over all ranks)
// is: every node's stager has it.
#pragma once

#include "io/cache.h"
#include "io/stream_loader.h"
#include "runtime/train/config.h"

#include <cstdint>
#include <memory>
#include <string>

namespace shardtrain::train {

class Staging {
 public:
  Staging(const Config& config, int local_rank);
  bool enabled() const { return cache_ != nullptr; }
  bool stager() const { return stager_; }
  io::ShardLocator locator();
  // Bytes this node's stager copied since the last call (0 on other ranks).
  int64_t take_bytes();
  // A line for the log at the end ("" when disabled or not the stager).
  std::string summary() const;

 private:
  std::unique_ptr<io::ShardCache> cache_;
  bool stager_ = false;
  int64_t reported_ = 0;
};

}  // namespace shardtrain::train
