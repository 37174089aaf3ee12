// shardtrain's public interface: training what a config describes.
//   shardtrain::train::load_config      a TOML config and its --set overrides (config.h)
//   shardtrain::train::run_training     the whole job, as `shardtrain train` (trainer.h)
//   shardtrain::train::plan_command     the memory plan, as `shardtrain plan` (memory_plan.h)
//   shardtrain::train::report_fatal_error   one line naming the rank; ends a job of several ranks
//   shardtrain::comm::MpiEnv            MPI's start and end
// The headers under shardtrain/ are the interface, stable within a minor
// version (docs/install.md); the ones they include are there because they
// must be, and may change.
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/train/config.h"
#include "runtime/train/fatal_error.h"
#include "runtime/train/memory_plan.h"
#include "runtime/train/trainer.h"
