// The first telemetry figures: where each rank's training-step time went.
//   step        = wall time of the step (evaluation excluded)
//   data        = gathering the batch from memory (the storage stall, later)
//   exposed     = blocked on gradient collectives while their data moved:
//                 the exposed communication
//   peer_blocked= blocked on gradient collectives that other ranks had not
//                 issued yet: load imbalance or a straggler, not the network
//   compute     = step - data - exposed - peer_blocked
//   comm        = data movement of the step's collectives (mostly overlapped)
//   peer_wait   = time the collectives waited for late ranks (mostly overlapped)
// Totals per rank; summarize() gathers every rank's means once, at the end.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/parallel/ddp.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace shardtrain::train {

struct StepTiming {
  int64_t steps = 0;
  double step_s = 0, data_s = 0, comm_s = 0, peer_wait_s = 0, exposed_s = 0, peer_blocked_s = 0;
  int64_t comm_bytes = 0;

  void add(double step, double data, const parallel::CommStats& comm);
  double compute_s() const { return step_s - data_s - exposed_s - peer_blocked_s; }
};

// Adds "timing" (rank 0's means per step) and "per_rank" (every rank's) to
// result, and returns the summary lines to print. Collective when comm is not
// null: every rank must call it.
std::string summarize_timing(const StepTiming& timing, int64_t global_batch, comm::Communicator* comm,
                             nlohmann::json& result);

}  // namespace shardtrain::train
