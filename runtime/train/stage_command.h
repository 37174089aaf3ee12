// `shardtrain stage`: the cache stager (io/cache.h) alone, in the foreground,
// to stage a split into a local cache before a job (docs/io.md).
#pragma once

#include "io/loader_options.h"

#include <string>

namespace shardtrain::train {

// Copies every shard of the split directory `source_dir` into
// <options.cache_dir>/<split dir name>/, printing a line per shard and a
// summary. Returns the exit code: 1 when a shard could not be staged (its
// copy failed verification, or copying, twice), 0 otherwise.
int stage_command(const std::string& source_dir, const io::StageOptions& options);

}  // namespace shardtrain::train
