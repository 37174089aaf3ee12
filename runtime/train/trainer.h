// `shardtrain train`: the whole job, top to bottom, as the user sees it.
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/train/config.h"

#include <string>

namespace shardtrain::train {

struct TrainOptions {
  std::string run_dir;     // overrides run.dir when not empty
  bool overwrite = false;  // reuse a run directory that holds an earlier run
  // "auto": continue from the newest complete checkpoint of the run directory
  // (appending to its log and metrics), or start from step 0 when it has
  // none; a path: continue from that checkpoint file. "" = start afresh.
  std::string resume;
};

// Runs training to the target or the end; writes the run directory. Returns
// the process exit code (0 also when the target was not reached: that is a
// result, written to result.json; non-zero when training diverged).
int run_training(const Config& config, const TrainOptions& options, const comm::MpiEnv& mpi);

}  // namespace shardtrain::train
