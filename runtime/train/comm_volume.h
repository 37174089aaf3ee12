// Communication volume per step and rank, measured against theory: what a
// bandwidth-optimal (ring) implementation of the strategy must send
// (parallel::StrategySpec::wire_theory). The measured figure counts the same
// way per collective (parallel::CommStats::wire_bytes), so the two differ
// only by what the implementation adds (padding of shards) or saves (FSDP's
// FULL_SHARD does not gather the last Block again for its backward).
#pragma once

#include "runtime/parallel/strategy.h"

#include <cstdint>
#include <string>

namespace shardtrain::train {

// "[summary] communication volume: ..." for the log.
std::string comm_volume_line(const parallel::WireTheory& theory, int64_t parameters,
                             double measured_wire_bytes_per_step);

}  // namespace shardtrain::train
