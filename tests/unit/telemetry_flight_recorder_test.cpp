// The flight recorder: a dump on demand, and the dump a SIGTERM leaves behind
// (in a forked child, which then exits with 128 + SIGTERM).
#include "runtime/telemetry/flight_recorder.h"
#include "tests/unit/telemetry_test_util.h"

#include "runtime/telemetry/recorder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace shardtrain::telemetry;
namespace fs = std::filesystem;
using ::testing::EndsWith;

namespace {

fs::path fresh_dir(const std::string& name) { return shardtrain::telemetry::testing::fresh_dir("flight", name); }
using shardtrain::telemetry::testing::read_json;

bool has_span(const nlohmann::json& dump, const std::string& name) {
  for (const auto& s : dump["spans"])
    if (s["name"] == name) return true;
  return false;
}

TEST(FlightRecorder, DumpWritesTheRecentSpansAndKeepsTheFirstReason) {
  Recorder::instance().enable(4096, true);
  const fs::path dir = fresh_dir("dump");
  FlightRecorder::arm(dir.string(), 3, 16, [] { return std::string("step 7, epoch 0.25"); });
  const fs::path expected = dir / "flight" / "rank-00003.json";
  EXPECT_EQ(FlightRecorder::path(), expected.string());
  { Span s("before the failure", "compute", 5); }
  SpanEvent e;
  e.name = "allreduce";
  e.category = "comm";
  e.start_s = 1.0;
  e.end_s = 1.5;
  e.bytes = 4096;
  e.seq = 57;
  e.detail = "ring";
  Recorder::instance().record(e);

  FlightRecorder::dump("shardtrain: watchdog: allreduce #57 stuck");
  FlightRecorder::dump("a later reason");  // rewrites the spans, keeps the first reason
  ASSERT_TRUE(fs::exists(expected));
  EXPECT_FALSE(fs::exists(expected.string() + ".tmp"));
  const auto j = read_json(expected);
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["reason"], "shardtrain: watchdog: allreduce #57 stuck");
  EXPECT_THAT(j["time"].get<std::string>(), EndsWith("Z"));
  EXPECT_EQ(j["context"], "step 7, epoch 0.25");
  EXPECT_TRUE(has_span(j, "before the failure"));
  bool found = false;
  for (const auto& s : j["spans"]) {
    for (const char* key : {"name", "cat", "start_s", "end_s", "tid"}) EXPECT_TRUE(s.contains(key)) << key;
    if (s["name"] == "allreduce" && s["seq"] == 57) {
      found = true;
      EXPECT_EQ(s["cat"], "comm");
      EXPECT_EQ(s["bytes"], 4096);
      EXPECT_EQ(s["detail"], "ring");
      EXPECT_DOUBLE_EQ(s["end_s"].get<double>(), 1.5);
    }
  }
  EXPECT_TRUE(found);
  fs::remove_all(dir);
}

TEST(FlightRecorder, DumpNeverThrows) {
  FlightRecorder::arm("/proc/no/such/run/dir", 0, 16, []() -> std::string { throw std::runtime_error("no state"); });
  EXPECT_NO_THROW(FlightRecorder::dump("cannot be written"));
}

// A dump the disk has no room for (its temporary file is /dev/full here)
// goes to stderr in short, and leaves no temporary file.
TEST(FlightRecorder, DumpThatCannotBeWrittenGoesToStderrInShort) {
  Recorder::instance().enable(4096, true);
  const fs::path dir = fresh_dir("full");
  FlightRecorder::arm(dir.string(), 4, 16, [] { return std::string("in step 9"); });
  fs::create_directories(dir / "flight");
  const fs::path tmp = dir / "flight" / "rank-00004.json.tmp";
  fs::create_symlink("/dev/full", tmp);
  { Span s("the last span", "compute", 5); }
  ::testing::internal::CaptureStderr();
  FlightRecorder::dump("shardtrain: watchdog: allreduce #104 stuck");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err,
              ::testing::HasSubstr("flight recorder: cannot write " + (dir / "flight" / "rank-00004.json").string()));
  EXPECT_THAT(err, ::testing::HasSubstr("No space left on device"));
  EXPECT_THAT(err, ::testing::HasSubstr("rank 4's dump, in short: reason: shardtrain: watchdog: allreduce #104 stuck; "
                                        "state: in step 9; each thread's newest span: [thread "));
  EXPECT_THAT(err, ::testing::ContainsRegex("the last span \\(compute #5\\) ended [0-9.]+ s ago\\]"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(tmp)));
  EXPECT_FALSE(fs::exists(dir / "flight" / "rank-00004.json"));
  fs::remove_all(dir);
}

TEST(FlightRecorder, SigtermDumpsAndExitsWith143) {
  Recorder::instance().enable(4096, true);
  const fs::path dir = fresh_dir("sigterm");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child only arms, records and raises; the flight thread ends it.
    FlightRecorder::arm(dir.string(), 5, 32, [] { return std::string("step 3"); });
    for (int i = 0; i < 10; ++i) Span s("child span", "compute", i);
    raise(SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    _exit(1);  // not reached unless the signal path failed
  }
  int status = 0;
  pid_t done = 0;
  for (int waited_ms = 0; waited_ms < 10000 && done == 0; waited_ms += 10) {
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child did not exit after SIGTERM";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  const fs::path file = dir / "flight" / "rank-00005.json";
  ASSERT_TRUE(fs::exists(file));
  const auto j = read_json(file);
  EXPECT_EQ(j["rank"], 5);
  EXPECT_EQ(j["reason"], "signal SIGTERM");
  EXPECT_EQ(j["context"], "step 3");
  int child_spans = 0;
  for (const auto& s : j["spans"]) child_spans += s["name"] == "child span";
  EXPECT_EQ(child_spans, 10);
  fs::remove_all(dir);
}

// Exits of `child` within `limit_ms`, or -1 (the child is then killed).
int exit_status_within(pid_t child, int limit_ms) {
  int status = 0;
  for (int waited_ms = 0; waited_ms < limit_ms; waited_ms += 10) {
    if (waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return -1;
}

// Preemption: the first signal is recorded and the process goes on (exit 75
// here, as a preempted run ends); without an exit, the grace ends it with
// 128 + signal and dumps.
TEST(FlightRecorder, DeferredSignalIsRecordedAndTheGraceEndsTheProcess) {
  const fs::path dir = fresh_dir("deferred");
  for (const bool finish_in_time : {true, false}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      FlightRecorder::arm(dir.string(), 2, 8);
      FlightRecorder::defer_signals(0.3, "grace over");
      raise(SIGUSR1);
      for (int i = 0; i < 100 && FlightRecorder::stop_signal() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (FlightRecorder::stop_signal() != SIGUSR1) _exit(2);
      if (finish_in_time) _exit(75);
      std::this_thread::sleep_for(std::chrono::seconds(10));
      _exit(3);  // not reached unless the grace failed
    }
    const int status = exit_status_within(child, 5000);
    EXPECT_EQ(status, finish_in_time ? 75 : 128 + SIGUSR1) << finish_in_time;
  }
  const auto j = read_json(dir / "flight" / "rank-00002.json");
  EXPECT_EQ(j["reason"], "signal SIGUSR1: stopping after the next step");  // the first reason is kept
  fs::remove_all(dir);
}

// Without telemetry the recorder is never armed: deferring still catches
// the signal (a run with telemetry off is preempted the same way).
TEST(FlightRecorder, DeferringWithoutArmingStillCatchesTheSignal) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FlightRecorder::defer_signals(30, "grace over");
    raise(SIGTERM);
    for (int i = 0; i < 200 && FlightRecorder::stop_signal() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    _exit(FlightRecorder::stop_signal() == SIGTERM ? 75 : 2);
  }
  EXPECT_EQ(exit_status_within(child, 5000), 75);
}

}  // namespace
