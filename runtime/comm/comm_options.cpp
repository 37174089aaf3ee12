#include "runtime/comm/communicator.h"

#include "runtime/core/error.h"

#include <cmath>

namespace shardtrain::comm {

void validate(const CommOptions& o) {
  ST_CHECK(o.chunk_bytes >= 64 && o.chunk_bytes <= (int64_t(1) << 30),
           "comm.chunk_bytes must be within 64 bytes .. 1 GiB, got {}", o.chunk_bytes);
  ST_CHECK(o.small_message_bytes >= 0 && o.reduce_scatter_small_bytes >= 0 && o.allgather_small_bytes >= 0 &&
               o.oneshot_bytes >= 0,
           "comm.small_message_bytes and comm.oneshot_bytes must not be negative");
  ST_CHECK(std::isfinite(o.timeout_s) && o.timeout_s > 0, "comm.timeout_s must be positive, got {}", o.timeout_s);
  ST_CHECK(o.ranks_per_node >= 0, "comm.ranks_per_node must not be negative, got {}", o.ranks_per_node);
  ST_CHECK(!o.tuning.empty(), "comm.tuning must be \"auto\", \"probe\", \"off\" or a tuning file's path, got \"\"");
  ST_CHECK(std::isfinite(o.probe_budget_s) && o.probe_budget_s >= 0 && o.probe_budget_s <= 600,
           "comm.probe_budget_s must be within 0 .. 600 seconds, got {}", o.probe_budget_s);
}

}  // namespace shardtrain::comm
