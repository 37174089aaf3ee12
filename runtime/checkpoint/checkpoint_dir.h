// The checkpoints of a run: <dir>/step-<8 digits>.h5, newest by step. A file
// still named *.tmp is one whose writing never finished (a crash, a kill):
// it is never loaded, and the next checkpoint written replaces it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::checkpoint {

std::string checkpoint_path(const std::string& dir, int64_t step);

struct Listed {
  std::string path;
  int64_t step = 0;
};
// Complete checkpoints in `dir` (a missing directory has none), oldest first.
std::vector<Listed> list_checkpoints(const std::string& dir);
// The newest complete checkpoint, if any.
std::optional<Listed> latest_checkpoint(const std::string& dir);
// Removes all but the newest `keep` complete checkpoints and any leftover
// *.tmp file (with what MPI-IO left beside it, *.tmp.*) older than the
// newest complete one; returns the removed paths.
std::vector<std::string> keep_latest(const std::string& dir, int64_t keep);
// Renames the complete checkpoints newer than `step` to
// <name>.superseded-<tag>, which nothing lists or loads; returns the new
// paths. A run that starts at `step` (0, or the checkpoint it resumed from)
// calls it: files newer than where it starts belong to an earlier run of
// the directory, and left in place, retention (newest by step) would delete
// this run's checkpoints instead of them, and `--resume auto` would pick
// them up.
std::vector<std::string> set_aside_newer_than(const std::string& dir, int64_t step, const std::string& tag);

}  // namespace shardtrain::checkpoint
