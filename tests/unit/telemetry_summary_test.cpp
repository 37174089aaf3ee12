// Per-rank statistics, the cross-rank summary and the straggler diagnosis,
// from hand-made records.
#include "runtime/telemetry/summary.h"

#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace shardtrain;
using namespace shardtrain::telemetry;
using ::testing::HasSubstr;

namespace {

// A step of a synchronous job: components in seconds, compute the rest.
StepRecord step(int64_t i, double compute, double data = 0.001, double comm = 0.002, double peers = 0,
                int64_t samples = 64) {
  StepRecord r;
  r.step = i;
  r.data_wait_s = data;
  r.comm_exposed_s = comm;
  r.blocked_on_peers_s = peers;
  r.step_s = compute + data + comm + peers;
  r.samples = samples;
  return r;
}

// `steps` steps of one rank; every 10th step is 10% slower, so medians are
// the typical step and not the mean.
std::vector<StepRecord> rank_steps(double compute, double data, double comm, double peers, int steps = 20) {
  std::vector<StepRecord> out;
  for (int i = 0; i < steps; ++i) out.push_back(step(i, compute * (i % 10 == 9 ? 1.1 : 1.0), data, comm, peers));
  return out;
}

// Three ranks; rank 1 spends `extra` more seconds per step in one component
// and the others wait for it (blocked on peers), as in a synchronous job.
std::vector<RankStats> three_ranks(const char* where, double extra) {
  std::vector<RankStats> ranks;
  for (int r = 0; r < 3; ++r) {
    const bool slow = r == 1;
    const double compute = 0.040 + (slow && std::string(where) == "compute" ? extra : 0);
    const double data = 0.001 + (slow && std::string(where) == "data" ? extra : 0);
    const double comm = 0.002 + (slow && std::string(where) == "comm" ? extra : 0);
    ranks.push_back(rank_stats(r, rank_steps(compute, data, comm, slow ? 0.0 : extra)));
  }
  return ranks;
}

TEST(RankStats, MediansP95FractionsAndUtilization) {
  std::vector<StepRecord> records;
  const double steps[] = {0.3, 0.1, 1.0, 0.4, 0.2};  // unsorted on purpose
  for (int i = 0; i < 5; ++i) {
    StepRecord r;
    r.step = i;
    r.step_s = steps[i];
    r.data_wait_s = 0.01;
    r.h2d_s = 0.005;
    r.comm_exposed_s = 0.02;
    r.blocked_on_peers_s = i == 2 ? 0.5 : 0.0;
    r.comm_s = 0.03;
    r.samples = 10;
    r.io_bytes = 100;
    r.io_requests = 2;
    r.io_read_s = 0.001;
    r.mem_cpu_peak_bytes = 1000 * (i + 1);
    r.mem_gpu_peak_bytes = 3000 - 100 * i;
    r.cpu_process_s = 0.1;
    records.push_back(r);
  }
  const RankStats s = rank_stats(3, records);
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.steps, 5);
  EXPECT_DOUBLE_EQ(s.step_median_s, 0.3);  // nearest rank: the 3rd of 5
  EXPECT_DOUBLE_EQ(s.step_p95_s, 1.0);     // ceil(0.95 * 5) = 5th
  EXPECT_DOUBLE_EQ(s.step_mean_s, 0.4);
  // busy = step - peers: 0.3, 0.1, 0.5, 0.4, 0.2 -> 0.3
  EXPECT_DOUBLE_EQ(s.busy_median_s, 0.3);
  EXPECT_DOUBLE_EQ(s.data_wait_median_s, 0.01);
  EXPECT_DOUBLE_EQ(s.data_median_s, 0.015);
  EXPECT_DOUBLE_EQ(s.blocked_on_peers_median_s, 0.0);
  // compute = step - 0.035 - peers: 0.265, 0.065, 0.465, 0.365, 0.165 -> 0.265
  EXPECT_NEAR(s.compute_median_s, 0.265, 1e-12);
  const double total = 2.0;
  EXPECT_NEAR(s.au, (total - 5 * 0.035 - 0.5) / total, 1e-12);
  EXPECT_NEAR(s.data_wait_frac, 0.05 / total, 1e-12);
  EXPECT_NEAR(s.comm_exposed_frac, 0.1 / total, 1e-12);
  EXPECT_NEAR(s.blocked_on_peers_frac, 0.5 / total, 1e-12);
  EXPECT_NEAR(s.comm_s, 0.15, 1e-12);
  EXPECT_NEAR(s.samples_per_s, 50 / total, 1e-12);
  EXPECT_DOUBLE_EQ(s.io_bytes, 500);
  EXPECT_DOUBLE_EQ(s.io_requests, 10);
  EXPECT_DOUBLE_EQ(s.mem_peak_bytes, 5000);
  EXPECT_DOUBLE_EQ(s.mem_gpu_peak_bytes, 3000);
  EXPECT_NEAR(s.cpu_process_s, 0.5, 1e-12);
}

TEST(RankStats, PackUnpackRoundTrip) {
  RankStats s;
  s.rank = 7;
  s.steps = 123;
  // Distinct values in every field: a field left out or swapped shows.
  std::vector<double> v = s.pack();
  ASSERT_EQ(v.size(), RankStats::kPackedSize);
  for (size_t i = 2; i < v.size(); ++i) v[i] = 0.5 + static_cast<double>(i);
  const RankStats u = RankStats::unpack(v);
  EXPECT_EQ(u.rank, 7);
  EXPECT_EQ(u.steps, 123);
  EXPECT_EQ(u.pack(), v);
  EXPECT_EQ(RankStats::unpack(rank_stats(2, rank_steps(0.04, 0.001, 0.002, 0)).pack()).pack(),
            rank_stats(2, rank_steps(0.04, 0.001, 0.002, 0)).pack());
  EXPECT_THROW(RankStats::unpack({1.0, 2.0}), Error);
}

TEST(Summary, ExtraComputeOnOneRankIsAComputeStraggler) {
  const auto s = summarize(three_ranks("compute", 0.020), {});
  ASSERT_EQ(s["stragglers"].size(), 1u) << s.dump(2);
  const auto& st = s["stragglers"][0];
  EXPECT_EQ(st["rank"], 1);
  EXPECT_EQ(st["cause"], "compute");
  EXPECT_NEAR(st["busy_time_median_s"].get<double>(), 0.063, 1e-9);
  EXPECT_NEAR(st["excess_frac"].get<double>(), 0.063 / 0.043 - 1, 1e-9);
  EXPECT_NEAR(st["excess_s"]["compute"].get<double>(), 0.020, 1e-9);
  EXPECT_NEAR(st["excess_s"]["data"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR(st["excess_s"]["communication"].get<double>(), 0.0, 1e-12);
  EXPECT_THAT(summary_text(s), HasSubstr("straggler: rank 1 (busy 47% above the median: compute +20.0 ms/step)"));
}

TEST(Summary, ExtraDataWaitIsADataStraggler) {
  const auto s = summarize(three_ranks("data", 0.020), {});
  ASSERT_EQ(s["stragglers"].size(), 1u);
  EXPECT_EQ(s["stragglers"][0]["rank"], 1);
  EXPECT_EQ(s["stragglers"][0]["cause"], "data");
  EXPECT_NEAR(s["stragglers"][0]["excess_s"]["data"].get<double>(), 0.020, 1e-9);
}

TEST(Summary, ExtraExposedCommunicationIsACommunicationStraggler) {
  const auto s = summarize(three_ranks("comm", 0.020), {});
  ASSERT_EQ(s["stragglers"].size(), 1u);
  EXPECT_EQ(s["stragglers"][0]["rank"], 1);
  EXPECT_EQ(s["stragglers"][0]["cause"], "communication");
  EXPECT_THAT(summary_text(s), HasSubstr("communication +20.0 ms/step"));
}

TEST(Summary, NoStragglerUnderTheThreshold) {
  const auto s = summarize(three_ranks("compute", 0.001), {});  // 2.3% slower
  EXPECT_TRUE(s["stragglers"].empty());
  EXPECT_THAT(summary_text(s), HasSubstr("no stragglers (threshold 5%)"));
  SummaryOptions strict;
  strict.straggler_threshold = 0.01;
  EXPECT_EQ(summarize(three_ranks("compute", 0.001), strict)["stragglers"].size(), 1u);
}

TEST(Summary, DocumentedKeysAndAcrossRankStatistics) {
  std::vector<RankStats> ranks;
  const double au[] = {0.9, 0.5, 0.7, 0.6};
  for (int r = 0; r < 4; ++r) {
    RankStats s;
    s.rank = 3 - r;  // out of order: per_rank comes back sorted
    s.steps = 10;
    s.au = au[r];
    s.step_median_s = 0.1;
    s.busy_median_s = 0.1;
    s.samples_per_s = 100;
    s.io_bytes = 1000;
    s.io_requests = 3;
    s.io_read_s = 0.5;
    s.step_mean_s = 0.1;
    s.comm_s = 0.2;              // 20 ms per step
    s.comm_exposed_frac = 0.05;  // 5 ms per step of 100: a quarter of it
    ranks.push_back(s);
  }
  const auto s = summarize(ranks, {});
  for (const char* key : {"ranks", "steps", "straggler_threshold", "per_rank", "across_ranks", "au_min", "au_median",
                          "samples_per_s", "io", "stragglers"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s["ranks"], 4);
  EXPECT_EQ(s["steps"], 10);
  ASSERT_EQ(s["per_rank"].size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s["per_rank"][r]["rank"], r);
  for (const char* key : {"rank",
                          "steps",
                          "step_time_median_s",
                          "step_time_p95_s",
                          "step_time_mean_s",
                          "busy_time_median_s",
                          "au",
                          "data_wait_frac",
                          "comm_exposed_frac",
                          "blocked_on_peers_frac",
                          "compute_median_s",
                          "data_wait_median_s",
                          "comm_exposed_median_s",
                          "comm_s",
                          "samples_per_s",
                          "io_bytes",
                          "io_requests",
                          "io_read_s",
                          "mem_peak_bytes",
                          "mem_gpu_peak_bytes",
                          "cpu_process_s"})
    EXPECT_TRUE(s["per_rank"][0].contains(key)) << key;
  EXPECT_EQ(s["per_rank"][0].size(), 21u);
  for (const char* key : {"step_time_median_s", "busy_time_median_s", "au", "data_wait_frac", "comm_exposed_frac",
                          "blocked_on_peers_frac"}) {
    ASSERT_TRUE(s["across_ranks"].contains(key)) << key;
    for (const char* stat : {"min", "median", "p95", "max"}) EXPECT_TRUE(s["across_ranks"][key].contains(stat));
  }
  const auto& a = s["across_ranks"]["au"];
  EXPECT_DOUBLE_EQ(a["min"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(a["median"].get<double>(), 0.6);  // nearest rank: the 2nd of 4
  EXPECT_DOUBLE_EQ(a["p95"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(a["max"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(s["au_min"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["au_median"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(s["samples_per_s"].get<double>(), 400);  // the sum over ranks
  EXPECT_EQ(s["io"]["bytes"], 4000);
  EXPECT_EQ(s["io"]["requests"], 12);
  EXPECT_DOUBLE_EQ(s["io"]["read_s"].get<double>(), 2.0);
  const std::string text = summary_text(s);
  EXPECT_THAT(text, HasSubstr("4 ranks, 10 steps"));
  EXPECT_THAT(text, HasSubstr("rank"));
  EXPECT_THAT(text, HasSubstr("read 4000 B in 12 requests"));
  EXPECT_THAT(text, HasSubstr("communication 20.0 ms per step per rank; steps waited 5.00 ms on it (25.0% exposed"));
}

TEST(Summary, GlobalBatchGivesThroughputWhenRecordsCountNoSamples) {
  std::vector<RankStats> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].steps = 5;
    ranks[r].step_mean_s = 0.1;
  }
  SummaryOptions o;
  o.global_batch = 128;
  EXPECT_DOUBLE_EQ(summarize(ranks, o)["samples_per_s"].get<double>(), 1280);
}

TEST(Summary, OneRankAndZeroSteps) {
  const auto empty = summarize({rank_stats(0, {})}, {});
  EXPECT_EQ(empty["ranks"], 1);
  EXPECT_EQ(empty["steps"], 0);
  EXPECT_TRUE(empty["stragglers"].empty());
  EXPECT_DOUBLE_EQ(empty["au_median"].get<double>(), 0.0);
  EXPECT_THAT(summary_text(empty), HasSubstr("1 rank, 0 steps (no step records)"));

  const auto one = summarize({rank_stats(0, rank_steps(0.04, 0.001, 0.002, 0))}, {});
  EXPECT_EQ(one["steps"], 20);
  EXPECT_TRUE(one["stragglers"].empty());
  EXPECT_NEAR(one["au_median"].get<double>(), one["per_rank"][0]["au"].get<double>(), 1e-12);
  const std::string text = summary_text(one);
  EXPECT_THAT(text, HasSubstr("1 rank, 20 steps"));
  EXPECT_THAT(text, HasSubstr("no stragglers (threshold 5%)"));

  const auto none = summarize({}, {});
  EXPECT_EQ(none["ranks"], 0);
  EXPECT_NO_THROW(summary_text(none));
}

TEST(Summary, TextTableShowsEveryRankAndIsCappedForManyRanks) {
  std::vector<RankStats> few, many;
  for (int r = 0; r < 40; ++r) {
    RankStats s = rank_stats(r, rank_steps(0.04 + (r == 33 ? 0.01 : 0), 0.001, 0.002, r == 33 ? 0 : 0.01));
    if (r < 3) few.push_back(s);
    many.push_back(s);
  }
  const std::string small = summary_text(summarize(few, {}));
  EXPECT_THAT(small, HasSubstr("busy ms"));
  EXPECT_THAT(small, HasSubstr("peers %"));
  const std::string big = summary_text(summarize(many, {}));
  EXPECT_THAT(big, HasSubstr("32 more ranks"));
  EXPECT_THAT(big, HasSubstr("straggler: rank 33"));
  EXPECT_LT(std::count(big.begin(), big.end(), '\n'), 16);
}

}  // namespace
