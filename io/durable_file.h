// Making a finished file durable and visible in one step: fsync the file,
// rename it over its final name, fsync the directory (so the rename itself
// survives a power loss). A reader sees either no file or the whole file.
// Checkpoints and shard files are published this way.
#pragma once

#include <string>

namespace shardtrain::io {

// Creates the directory `path` will be in (and its parents).
void make_parent_directory(const std::string& path);
// fsync(tmp); rename(tmp, final_path); fsync(directory). Errors name the file.
void publish(const std::string& tmp, const std::string& final_path);

}  // namespace shardtrain::io
