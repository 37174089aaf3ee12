// Per-rank trace files and their merge into one Chrome trace.
#include "runtime/telemetry/trace.h"
#include "tests/unit/telemetry_test_util.h"

#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

using namespace shardtrain;
using namespace shardtrain::telemetry;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) { return shardtrain::telemetry::testing::fresh_dir("trace", name); }
using shardtrain::telemetry::testing::read_json;

SpanEvent span(const char* name, const char* cat, double start, double end, int tid) {
  SpanEvent e;
  e.name = name;
  e.category = cat;
  e.start_s = start;
  e.end_s = end;
  e.tid = tid;
  return e;
}

// Rank r's file: a step, a forward, and an all-reduce with its attributes.
void write_rank(const fs::path& file, int rank) {
  const double t0 = 100.0;
  TraceWriter w(file.string(), rank, t0);
  SpanEvent ar = span("allreduce", "comm", t0 + 0.0102, t0 + 0.0105, Recorder::kFirstLaneTid);
  ar.bytes = 4096;
  ar.seq = 17;
  ar.detail = "ring";
  w.write({span("step", "step", t0 + 0.010, t0 + 0.020, 0), span("forward", "compute", t0 + 0.011, t0 + 0.012, 0)});
  w.write({ar});
  w.close({{0, "train"}, {Recorder::kFirstLaneTid, "comm engine"}});
}

TEST(Trace, MergedTraceIsValidWithEveryRankAsAProcess) {
  const fs::path dir = fresh_dir("merge");
  std::vector<std::string> files;
  for (int r = 0; r < 2; ++r) {
    files.push_back((dir / ("trace-rank-0000" + std::to_string(r) + ".json")).string());
    write_rank(files.back(), r);
    EXPECT_TRUE(read_json(files.back()).is_array());  // each rank's file alone is valid too
  }
  const fs::path out = dir / "trace.json";
  const int64_t n = merge_traces(files, out.string());
  const auto j = read_json(out);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  const auto& events = j["traceEvents"];
  ASSERT_TRUE(events.is_array());
  EXPECT_EQ(static_cast<int64_t>(events.size()), n);

  std::map<int, int> complete_per_pid;
  std::map<int, std::string> process_names;
  int thread_names = 0;
  for (const auto& e : events) {
    ASSERT_TRUE(e.contains("pid")) << e.dump();
    const int pid = e["pid"];
    if (e["ph"] == "X") {
      ++complete_per_pid[pid];
      EXPECT_GE(e["dur"].get<double>(), 0);
    } else if (e["ph"] == "M" && e["name"] == "process_name") {
      process_names[pid] = e["args"]["name"];
    } else if (e["ph"] == "M" && e["name"] == "thread_name") {
      ++thread_names;
    }
  }
  EXPECT_EQ(complete_per_pid, (std::map<int, int>{{0, 3}, {1, 3}}));
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(thread_names, 4);

  // Times in microseconds from t0; attributes as args.
  for (const auto& e : events) {
    if (e["name"] == "step") {
      EXPECT_NEAR(e["ts"].get<double>(), 10000, 0.01);
      EXPECT_NEAR(e["dur"].get<double>(), 10000, 0.01);
      EXPECT_EQ(e["tid"], 0);
      EXPECT_FALSE(e.contains("args"));
    }
    if (e["name"] == "allreduce") {
      EXPECT_EQ(e["tid"], Recorder::kFirstLaneTid);
      EXPECT_EQ(e["args"]["bytes"], 4096);
      EXPECT_EQ(e["args"]["seq"], 17);
      EXPECT_EQ(e["args"]["algorithm"], "ring");
    }
  }
  fs::remove_all(dir);
}

TEST(Trace, AWriterClosedEarlyStillLeavesAValidArray) {
  const fs::path dir = fresh_dir("early");
  const fs::path file = dir / "trace-rank-00003.json";
  {
    TraceWriter w(file.string(), 3, 0.0);
    SpanEvent e = span(Recorder::intern("name with \"quotes\"\n"), "io", 1.0, 2.0, 1);
    e.detail = "a\\b";
    w.write({e});
  }  // no close()
  const auto j = read_json(file);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.back()["name"], "name with \"quotes\"\n");
  EXPECT_EQ(j.back()["args"]["detail"], "a\\b");
  EXPECT_EQ(j.back()["pid"], 3);
  fs::remove_all(dir);
}

// A job that fails ends in MPI_Abort or _exit, which never run the writer's
// destructor: whatever write() was given is on disk by then, ending after a
// whole event (a trace without its closing bracket, which the Trace Event
// Format accepts).
TEST(Trace, WhatWasWrittenIsOnDiskBeforeTheWriterCloses) {
  const fs::path dir = fresh_dir("flushed");
  const fs::path file = dir / "trace-rank-00000.json";
  TraceWriter w(file.string(), 0, 0.0);
  w.write(
      {span(Recorder::intern("step"), "compute", 1.0, 2.0, 1), span(Recorder::intern("step"), "compute", 2.0, 3.0, 1)});
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '}');
  const auto j = nlohmann::json::parse(text + "]");
  EXPECT_EQ(j.size(), 4u);  // the process name and sort index, then the two spans
  w.close({});
  fs::remove_all(dir);
}

TEST(Trace, AMissingOrCorruptRankFileIsAnErrorNamingIt) {
  const fs::path dir = fresh_dir("corrupt");
  const std::string good = (dir / "trace-rank-00000.json").string();
  write_rank(good, 0);
  const std::string truncated = (dir / "trace-rank-00001.json").string();
  std::ofstream(truncated) << "[\n{\"name\":\"step\",\"ph\":\"X\",\"ts\":1,";
  const std::string not_a_trace = (dir / "trace-rank-00002.json").string();
  std::ofstream(not_a_trace) << "{\"traceEvents\": []}";
  const std::string missing = (dir / "trace-rank-00009.json").string();
  const std::string out = (dir / "trace.json").string();
  for (const auto& bad : {truncated, not_a_trace, missing}) {
    try {
      merge_traces({good, bad}, out);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(bad));
    }
    EXPECT_FALSE(fs::exists(out)) << "a failed merge leaves no trace.json";
    EXPECT_FALSE(fs::exists(out + ".tmp"));
  }
  EXPECT_THROW(TraceWriter((dir / "no-such-dir" / "x.json").string(), 0, 0.0), Error);
  fs::remove_all(dir);
}

}  // namespace
