// Step records through JSON and back; bus-bandwidth factors.
#include "runtime/telemetry/step_record.h"

#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace shardtrain;
using namespace shardtrain::telemetry;

namespace {

StepRecord sample_record() {
  StepRecord r;
  r.rank = 1;
  r.step = 41;
  r.epoch = 0.0876;
  r.t_start_s = 2.113;
  r.step_s = 0.0473;
  r.data_wait_s = 0.00005;
  r.h2d_s = 0.00001;
  r.comm_exposed_s = 0.00002;
  r.blocked_on_peers_s = 0.0004;
  r.debug_delay_s = 0.02;
  r.forward_s = 0.0151;
  r.backward_s = 0.0309;
  r.optimizer_s = 0.0001;
  r.comm_s = 0.00031;
  r.comm_bytes = 334464;
  r.collectives.push_back({"allreduce", "shm", 123, 125960, 0.00011, 0.00002, 1.14});
  r.collectives.push_back({"allgather", "ring", 124, 4096, 0.0002, 0.0, 0.01});
  r.eval_s = 1.5;
  r.checkpoint_s = 0.25;
  r.io_bytes = 1 << 20;
  r.io_requests = 4;
  r.io_read_s = 0.003;
  r.mem_cpu_current_bytes = 41234432;
  r.mem_cpu_peak_bytes = 52428800;
  r.cpu_train_thread_s = 0.047;
  r.cpu_process_s = 0.0475;
  r.samples = 64;
  return r;
}

TEST(StepRecord, JsonHasTheDocumentedKeysAndComputeS) {
  const nlohmann::json j = to_json(sample_record());
  for (const char* key : {"rank",
                          "step",
                          "epoch",
                          "t_start_s",
                          "step_s",
                          "data_wait_s",
                          "h2d_s",
                          "comm_exposed_s",
                          "blocked_on_peers_s",
                          "compute_s",
                          "debug_delay_s",
                          "forward_s",
                          "backward_s",
                          "optimizer_s",
                          "comm_s",
                          "comm_bytes",
                          "comm_wire_bytes",
                          "collectives",
                          "eval_s",
                          "checkpoint_s",
                          "io_bytes",
                          "io_requests",
                          "io_read_s",
                          "io_queued",
                          "stage_bytes",
                          "mem_cpu_current_bytes",
                          "mem_cpu_peak_bytes",
                          "mem_gpu_current_bytes",
                          "mem_gpu_peak_bytes",
                          "cpu_train_thread_s",
                          "cpu_process_s",
                          "samples"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.size(), 32u);
  EXPECT_DOUBLE_EQ(j["compute_s"].get<double>(), 0.0473 - 0.00005 - 0.00001 - 0.00002 - 0.0004);
  const auto& c = j["collectives"][0];
  EXPECT_EQ(c["op"], "allreduce");
  EXPECT_EQ(c["algorithm"], "shm");
  EXPECT_EQ(c["seq"], 123);
  EXPECT_EQ(c["bytes"], 125960);
  for (const char* key : {"duration_s", "peer_wait_s", "busbw_gbs"}) EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_TRUE(j["comm_bytes"].is_number_integer());
}

TEST(StepRecord, RoundTripsThroughJsonText) {
  const StepRecord a = sample_record();
  const StepRecord b = step_record_from_json(nlohmann::json::parse(to_json(a).dump()));
  EXPECT_EQ(to_json(b), to_json(a));  // every field, the collectives included
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.samples, 64);
  ASSERT_EQ(b.collectives.size(), 2u);
  EXPECT_EQ(b.collectives[1].algorithm, "ring");
  EXPECT_DOUBLE_EQ(b.compute_s(), a.compute_s());
}

TEST(StepRecord, MissingKeysTakeDefaultsAndWrongTypesNameTheKey) {
  const StepRecord r = step_record_from_json(nlohmann::json{{"step", 3}, {"step_s", 0.5}});
  EXPECT_EQ(r.step, 3);
  EXPECT_DOUBLE_EQ(r.step_s, 0.5);
  EXPECT_TRUE(r.collectives.empty());
  try {
    step_record_from_json(nlohmann::json{{"step_s", "slow"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'step_s'"));
  }
  EXPECT_THROW(step_record_from_json(nlohmann::json::array()), Error);
}

TEST(BusBandwidth, FactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 4), 2.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 1), 0.0);
  EXPECT_DOUBLE_EQ(busbw_factor("reduce_scatter", 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(busbw_factor("allgather", 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor("barrier", 4), 0.0);
  EXPECT_THROW(busbw_factor("scatter_gather_dance", 4), Error);
  EXPECT_THROW(busbw_factor("allreduce", 0), Error);
}

}  // namespace
