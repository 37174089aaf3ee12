// Checkpoints of a training run (runtime/checkpoint) as the trainer uses
// them: what the run's model, optimizer and strategy look like to a
// checkpoint, when one is due, and where `--resume` finds one.
#pragma once

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/parallel/strategy.h"
#include "runtime/train/config.h"
#include "runtime/train/session.h"

#include <string>
#include <vector>

namespace shardtrain::train {

class Checkpointing {
 public:
  // `run_dir` holds checkpoints/ unless checkpoint.dir says otherwise;
  // `strategy` says what this rank holds (its checkpoint_view) and
  // `strategy_name` (parallel::StrategySpec::name) is recorded as the origin.
  Checkpointing(const Config& config, const std::string& run_dir, Session& s, parallel::Strategy& strategy,
                const std::string& strategy_name, int rank, int world);

  const std::string& dir() const { return dir_; }
  bool enabled() const { return every_ > 0; }
  bool due(int64_t step) const { return every_ > 0 && step % every_ == 0; }

  // Collective. Writes the checkpoint of `progress` (the trainer's step and
  // sampler position), then keeps the newest checkpoint.keep. Returns the
  // path and the seconds it took.
  std::pair<std::string, double> save(const checkpoint::Progress& progress, int64_t step_of_fault_hook = -1);

  // Collective: rank 0 sets the complete checkpoints newer than `step` (where
  // this run starts) aside (checkpoint::set_aside_newer_than); returns their
  // new paths on rank 0.
  std::vector<std::string> set_aside_newer_than(int64_t step);

  // What `--resume` names, in the order to try: "auto", the complete
  // checkpoints in dir(), newest first (none: empty); else that one file.
  std::vector<std::string> candidates(const std::string& resume) const;
  // Collective: loads `path` into what this rank holds (the model or its
  // shard, the optimizer state) at any world size and strategy, and returns
  // its header.
  checkpoint::Header load(const std::string& path);

  // Config lines that differ between the checkpoint's config and this run's
  // (run.dir left out), as "key: old -> new"; past `limit`, one line saying
  // how many more.
  std::vector<std::string> config_changes(const checkpoint::Header& h, size_t limit = 8) const;

 private:
  checkpoint::Identity identity() const;
  checkpoint::Buffers buffers() const;

  const Config& config_;
  Session& s_;
  parallel::Strategy& strategy_;
  std::string strategy_name_;
  int rank_, world_;
  std::string dir_, config_toml_;
  int64_t every_, keep_;
};

}  // namespace shardtrain::train
