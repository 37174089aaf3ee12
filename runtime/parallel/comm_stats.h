// A strategy's communication since it was last asked (see comm/work.h for
// the times a collective records).
#pragma once

#include "runtime/comm/work.h"
#include "runtime/telemetry/step_record.h"

#include <cstdint>
#include <vector>

namespace shardtrain::parallel {

struct CommStats {
  double comm_s = 0;           // data movement: from all ranks' arrival to completion, summed
  double peer_wait_s = 0;      // collectives waiting for the other ranks to issue them, summed
  double exposed_s = 0;        // training thread blocked while data moved: exposed communication
  double blocked_peers_s = 0;  // training thread blocked waiting for other ranks (imbalance)
  int64_t bytes = 0;           // payload bytes
  // Bytes this rank sends with a bandwidth-optimal algorithm (ring: an
  // all-reduce 2(N-1)/N of its buffer, an all-gather or reduce-scatter
  // (N-1)/N of the full buffer): the figure the theory counts, whatever the
  // algorithm that ran (a shared-memory one sends nothing over a network).
  int64_t wire_bytes = 0;
  int64_t collectives = 0;
  std::vector<telemetry::CollectiveRecord> records;  // one per completed collective

  // A completed collective over `ranks` ranks: its record, times and bytes
  // (wire bytes are counted when it is issued).
  void add_completed(const comm::Work& w, int ranks);
  // Another strategy's (ZeRO-1's gathers next to its Ddp's buckets).
  void add(const CommStats& other);
};

}  // namespace shardtrain::parallel
