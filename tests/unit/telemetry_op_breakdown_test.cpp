// The op-time table: means per step without the first step, ops by time,
// the step's other parts, the remainder, and the JSON round trip of a
// record's ops.
#include "runtime/telemetry/op_breakdown.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace shardtrain::telemetry;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

StepRecord timed_step(int64_t i, double linear_s, double norm_s, double step_s) {
  StepRecord r;
  r.step = i;
  r.step_s = step_s;
  r.data_wait_s = 0.001;
  r.comm_exposed_s = 0.002;
  r.ops = {{"norm", norm_s, 2}, {"linear", linear_s, 6}};
  return r;
}

const nlohmann::json& find_row(const nlohmann::json& b, const std::string& name) {
  for (const auto& r : b["rows"])
    if (r["name"] == name) return r;
  static const nlohmann::json none;
  return none;
}

TEST(OpBreakdown, MeansLeaveOutTheFirstStep) {
  std::vector<StepRecord> records = {timed_step(0, 0.5, 0.5, 2.0)};  // set-up: left out
  for (int i = 1; i <= 4; ++i) records.push_back(timed_step(i, 0.010 * i, 0.002, 0.020 + 0.010 * i));
  const nlohmann::json b = op_breakdown(records);
  EXPECT_EQ(b["steps"], 4);
  EXPECT_NEAR(b["step_s"].get<double>(), 0.045, 1e-12);
  ASSERT_EQ(b["rows"][0]["name"], "linear");  // by time
  EXPECT_NEAR(b["rows"][0]["s"].get<double>(), 0.025, 1e-12);
  EXPECT_NEAR(b["rows"][0]["calls"].get<double>(), 6, 1e-12);
  EXPECT_NEAR(b["rows"][0]["frac"].get<double>(), 0.025 / 0.045, 1e-12);
  EXPECT_EQ(b["rows"][1]["name"], "norm");
  EXPECT_EQ(find_row(b, "data wait")["part"], "step");
  EXPECT_NEAR(find_row(b, "communication (exposed)")["s"].get<double>(), 0.002, 1e-12);
  // The remainder: 45 - 25 - 2 - 1 - 2 ms.
  EXPECT_NEAR(find_row(b, "other (host, gaps)")["s"].get<double>(), 0.015, 1e-12);
  EXPECT_NEAR(b["accounted_s"].get<double>(), 0.030, 1e-12);
}

TEST(OpBreakdown, OverlapShowsNoNegativeRemainder) {
  // A GPU's kernels counted while the host also waited on a collective.
  std::vector<StepRecord> records = {timed_step(0, 0.009, 0.001, 0.010), timed_step(1, 0.009, 0.001, 0.010)};
  const nlohmann::json b = op_breakdown(records);
  EXPECT_EQ(b["steps"], 1);
  EXPECT_EQ(find_row(b, "other (host, gaps)")["s"].get<double>(), 0.0);
  EXPECT_GT(b["accounted_s"].get<double>(), b["step_s"].get<double>());
}

TEST(OpBreakdown, RecordsWithoutOpsGiveNothing) {
  StepRecord r;
  r.step_s = 0.01;
  EXPECT_TRUE(op_breakdown({r, r}).empty());
  EXPECT_EQ(op_breakdown_text(op_breakdown({r}), 0), "");
}

TEST(OpBreakdown, TextNamesEveryOpAndSkipsEmptyParts) {
  std::vector<StepRecord> records = {timed_step(0, 0.01, 0.001, 0.02), timed_step(1, 0.01, 0.001, 0.02)};
  const std::string text = op_breakdown_text(op_breakdown(records), 3);
  EXPECT_THAT(text, HasSubstr("op time (rank 3, mean of 1 steps, 20.000 ms a step)"));
  EXPECT_THAT(text, HasSubstr("linear"));
  EXPECT_THAT(text, HasSubstr("10.000 ms  50.0% ###############"));
  EXPECT_THAT(text, HasSubstr("6 calls"));
  EXPECT_THAT(text, HasSubstr("data wait"));
  EXPECT_THAT(text, Not(HasSubstr("blocked on peers")));  // 0 in every step
  EXPECT_THAT(text, Not(HasSubstr(" \n")));               // no trailing blanks
  EXPECT_NE(text.back(), ' ');
}

TEST(OpBreakdown, RecordOpsSurviveJson) {
  const StepRecord r = timed_step(5, 0.25, 0.125, 0.5);
  const StepRecord back = step_record_from_json(to_json(r));
  ASSERT_EQ(back.ops.size(), 2U);
  EXPECT_EQ(back.ops[0].op, "linear");  // JSON objects keep names in order
  EXPECT_EQ(back.ops[0].s, 0.25);
  EXPECT_EQ(back.ops[0].calls, 6);
  EXPECT_EQ(back.ops[1].op, "norm");
  EXPECT_FALSE(to_json(StepRecord{}).contains("ops"));
}

}  // namespace
