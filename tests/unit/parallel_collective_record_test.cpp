// A collective's telemetry record: its bus bandwidth as nccl-tests defines
// it, from the whole buffer's size (an all-gather's output, not this rank's
// shard).
#include "runtime/parallel/collective_record.h"

#include <gtest/gtest.h>

namespace shardtrain::parallel {
namespace {

telemetry::CollectiveRecord record_of(const std::string& op, int64_t bytes, int ranks) {
  comm::Work w(op, 7, bytes);
  w.mark_started("ring", 1.0);
  w.mark_arrived(1.5);
  w.mark_finished(1.5 + 1e-3);
  return collective_record(w, ranks);
}

TEST(CollectiveRecord, BusBandwidthAsNcclTestsDefinesIt) {
  // 1 MB in 1 ms on 4 ranks: algorithm bandwidth 1 GB/s over the buffer.
  const telemetry::CollectiveRecord ar = record_of("allreduce", 1000000, 4);
  EXPECT_NEAR(ar.busbw_gbs, 2.0 * 3 / 4, 1e-9);
  EXPECT_NEAR(ar.duration_s, 1e-3, 1e-12);
  EXPECT_NEAR(ar.peer_wait_s, 0.5, 1e-12);
  EXPECT_EQ(ar.seq, 7);
  EXPECT_NEAR(record_of("reduce_scatter", 1000000, 4).busbw_gbs, 0.75, 1e-9);
  // An all-gather's bytes are this rank's 250 kB shard of the same 1 MB.
  const telemetry::CollectiveRecord ag = record_of("allgather", 250000, 4);
  EXPECT_EQ(ag.bytes, 250000);
  EXPECT_NEAR(ag.busbw_gbs, 0.75, 1e-9);
}

}  // namespace
}  // namespace shardtrain::parallel
