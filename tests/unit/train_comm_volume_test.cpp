// The communication volume a strategy must send per step and rank (what the
// run's summary compares the measured bytes with).
#include "runtime/train/comm_volume.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain::train {
namespace {

TEST(CommVolume, TheoryPerStrategy) {
  const int64_t psi = 1000000;  // parameters, on 4 ranks: (N-1)/N = 3/4
  EXPECT_DOUBLE_EQ(theory_wire_bytes("ddp", "", psi, 4), 2 * 4 * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory_wire_bytes("ddp", "", psi, 4, 0, 4, 2), 2 * 2 * 0.75 * 1e6);  // bf16 gradients
  EXPECT_DOUBLE_EQ(theory_wire_bytes("fsdp", "full", psi, 4), (4 + 4 + 4) * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory_wire_bytes("fsdp", "grad_op", psi, 4), (4 + 4) * 0.75 * 1e6);
  // HYBRID, 2 nodes of 2: FULL_SHARD within the node, the shard's gradient
  // all-reduced across nodes.
  EXPECT_DOUBLE_EQ(theory_wire_bytes("fsdp", "hybrid", psi, 4, 2), 12 * 0.5 * 1e6 + 2 * 0.5 * 4 * 1e6 / 2);
  EXPECT_DOUBLE_EQ(theory_wire_bytes("ddp", "", psi, 1), 0.0);
  EXPECT_DOUBLE_EQ(theory_wire_bytes("none", "", psi, 4), 0.0);
}

// With k micro-batches FSDP gathers for each of them and reduces once; DDP
// (no_sync) still all-reduces once.
TEST(CommVolume, MicroBatchesRepeatFsdpGathersOnly) {
  const int64_t psi = 1000000;
  EXPECT_DOUBLE_EQ(theory_wire_bytes("fsdp", "full", psi, 4, 0, 4, 4, 2), (2 * 2 * 4 + 4) * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory_wire_bytes("fsdp", "grad_op", psi, 4, 0, 4, 4, 2), (2 * 4 + 4) * 0.75 * 1e6);
  EXPECT_DOUBLE_EQ(theory_wire_bytes("ddp", "", psi, 4, 0, 4, 4, 3), 2 * 4 * 0.75 * 1e6);
  const std::string line = comm_volume_line("fsdp", "full", psi, 4, 15e6, 0, 4, 4, 2);
  EXPECT_THAT(line, ::testing::HasSubstr("(2 x 4+2 x 4+4)(N-1)/N B"));
  EXPECT_THAT(line, ::testing::HasSubstr("measured/theory 1.000"));
}

}  // namespace
}  // namespace shardtrain::train
