// `shardtrain prep upgrade`: converts a split's format version 1 shards to
// the current version in place (docs/formats.md). Each shard is rewritten
// under a temporary name and renamed over the old one, so a shard is always
// either the old file or the complete new one; the manifest is rewritten
// last. An interrupted upgrade is finished by running it again.
#pragma once

#include "io/manifest.h"
#include "io/shard_reader.h"

#include <cstdint>
#include <functional>
#include <string>

namespace shardtrain::io {

struct UpgradeSummary {
  int upgraded = 0;           // shards rewritten
  int current = 0;            // shards already of the current version (their samples checked)
  bool had_manifest = false;  // the old shards were checked against it before conversion
  int64_t samples = 0;        // in the split
  Manifest manifest;          // as written
};

// Upgrades every shard of `split_dir`. A version 1 shard is checked against
// manifest.json (when there is one) before it is converted, so that corrupt
// data never gets checksums that bless it; a shard that is already of the
// current version (from an interrupted upgrade, whose manifest entry is
// stale) is checked sample by sample instead. Errors name the file; the
// shards converted before an error stay converted. `progress` gets one line
// per shard.
UpgradeSummary upgrade_split(const std::string& split_dir,
                             const std::function<void(const std::string&)>& progress = {});

// Reads every sample of `shard` (format version 2) and checks it against
// /crc32: an Error naming the file and the samples that fail.
void verify_all_samples(const ShardReader& shard);

}  // namespace shardtrain::io
