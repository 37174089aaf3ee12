// The one line the watchdog prints before it ends the job: which collective
// of which communicator is stuck (or failed), its sequence number, size and
// dtype, and for every other rank of the communicator whether it arrived, and
// if not, what it is doing instead ("2 (in broadcast #57 ...)", "3 (last
// completed #55, nothing in flight)", "1 (issued broadcast #57 ... instead)").
// A pure function of snapshots, so it is tested without MPI.
#pragma once

#include "runtime/comm/watchdog/comm_monitor.h"

#include <optional>
#include <string>
#include <vector>

namespace shardtrain::comm {

struct StuckCollective {
  std::string comm;              // "world", "node", "cross-node"
  int rank = 0, size = 1;        // this rank in the communicator
  std::vector<int> world_ranks;  // of the communicator's ranks (shown when they differ)
  OpRecord op;                   // the stuck collective on this rank
  std::string what;              // "not complete after 300.0 s", "failed: ..."
};

// peers[r]: rank r's snapshot of this communicator, nullopt if it did not
// answer; peers[rank] is ignored.
std::string describe(const StuckCollective& stuck, const std::vector<std::optional<MonitorSnapshot>>& peers);

// "allreduce #57 (4194304 bytes, f32)"; with the algorithm when known.
std::string describe_op(const OpRecord& op, bool with_algorithm = false);

}  // namespace shardtrain::comm
