// A completed collective as the step record keeps it (op, algorithm, bytes,
// duration from all ranks' arrival, the wait for the others, busbw): one
// place for DDP's buckets and FSDP's gathers and reduce-scatters.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/telemetry/step_record.h"

namespace shardtrain::parallel {

telemetry::CollectiveRecord collective_record(const comm::Work& w, int ranks);

}  // namespace shardtrain::parallel
