// The doctor's start-up form (runtime/doctor): every rank probes its node
// without what takes seconds, the reports meet on rank 0, which writes
// doctor.json into the run directory and logs one line, plus the warnings
// and failures worth acting on. A job does not stop on them: the doctor
// reports what the fabric is, the job's own errors say what broke.
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/train/config.h"
#include "runtime/train/run_dir.h"

#include <nlohmann/json.hpp>

#include <string>

namespace shardtrain::train {

struct NodeCheck {
  nlohmann::json report;  // rank 0: the whole report (doctor.json); null elsewhere
  std::string line;       // rank 0: "2 nodes, 4 ranks: 0 fail, 1 warn (mpi-transport)"
};

// Collective over MPI_COMM_WORLD.
NodeCheck check_nodes(const Config& config, const comm::MpiEnv& mpi, RunDir& run);

}  // namespace shardtrain::train
