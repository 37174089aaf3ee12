// The progress engine (runtime/comm/engine/progress_engine.h) with an
// executor that records which thread ran each task: tasks run in issue
// order; a caller that waits for each collective as soon as it issues it
// runs them on its own thread; a collective left to such a caller that it
// does not wait for starts by itself, on the engine's thread.
#include "runtime/comm/engine/progress_engine.h"

#include "runtime/core/clock.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shardtrain::comm {
namespace {

// Each task takes `seconds` (a collective's time on the wire, busy as the
// engine polls).
class RecordingExecutor final : public Executor {
 public:
  explicit RecordingExecutor(double seconds = 0) : seconds_(seconds) {}
  void execute(std::span<Task> tasks) override {
    const double t0 = now_seconds();
    while (now_seconds() - t0 < seconds_) {
    }
    std::lock_guard lock(mu);
    for (const Task& t : tasks) runs.push_back({t.record.seq, std::this_thread::get_id()});
  }
  struct Run {
    int64_t seq;
    std::thread::id thread;
  };
  std::mutex mu;
  std::vector<Run> runs;

 private:
  double seconds_;
};

// The context switches of this process's thread named `name` (Linux:
// /proc/self/task/*/comm), or -1 where there is no such thread or no /proc.
int64_t context_switches(const std::string& name) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string got;
    if (!std::getline(comm, got) || got != name) continue;
    std::ifstream status(task.path() / "status");
    int64_t total = 0;
    for (std::string line; std::getline(status, line);)
      if (line.find("ctxt_switches:") != std::string::npos) total += std::stoll(line.substr(line.find(':') + 1));
    return total;
  }
  return -1;
}

WorkPtr submit(ProgressEngine& engine, int64_t seq, int64_t bytes) {
  Task task;
  task.record.seq = seq;
  task.record.bytes = bytes;
  task.work = std::make_shared<Work>("allreduce", seq, bytes, engine.helper());
  WorkPtr work = task.work;
  engine.submit(std::move(task));
  return work;
}

TEST(ProgressEngine, RunsEveryTaskOnceInIssueOrder) {
  RecordingExecutor ex;
  {
    ProgressEngine engine("test", ex, nullptr);
    std::vector<WorkPtr> works;
    for (int64_t i = 0; i < 200; ++i) {
      works.push_back(submit(engine, i, 4 << (i % 24)));
      if (i % 3 == 0) works.back()->wait();
    }
    for (const WorkPtr& w : works) w->wait();
  }
  ASSERT_EQ(ex.runs.size(), 200U);
  for (size_t i = 0; i < ex.runs.size(); ++i) EXPECT_EQ(ex.runs[i].seq, int64_t(i));
}

TEST(ProgressEngine, ACallerThatWaitsAtOnceRunsItsOwnCollectivesWithoutWakingTheEngine) {
  // Twice the engine's idle poll (50 us), so that without deferral it
  // sleeps, and is woken, between one collective and the next.
  RecordingExecutor ex(100e-6);
  ProgressEngine engine("test", ex, nullptr);
  submit(engine, 0, 4096)->wait();  // starts the engine's thread, which then names itself
  int64_t before = -1;
  for (const double t = now_seconds(); before < 0 && now_seconds() - t < 2;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    before = context_switches("st-test");
  }
  constexpr int kTasks = 200;
  const double t0 = now_seconds();
  for (int64_t i = 1; i <= kTasks; ++i) submit(engine, i, 4096)->wait();
  const double seconds = now_seconds() - t0;
  const int64_t switches = context_switches("st-test") - before;
  int on_caller = 0;
  {
    std::lock_guard lock(ex.mu);
    for (const auto& r : ex.runs) on_caller += r.thread == std::this_thread::get_id();
  }
  std::printf("[ info ] %d of %d ran on the caller's thread; the engine's thread switched %lld times in %.1f ms\n",
              on_caller, kTasks, static_cast<long long>(switches), seconds * 1e3);
  // Not every one: a caller descheduled between issuing and waiting for
  // longer than the engine leaves it its collective loses one.
  EXPECT_GE(on_caller, kTasks / 2);
  // Waking the engine for each collective (a thread switch there and back,
  // which on a machine with more threads than cores cost several times a
  // small collective) is what leaving them to the caller saves: before,
  // 127-200 switches here, on top of the wakes below. The engine still wakes
  // every 0.5 ms (its kDefer_s) to look for a collective its caller left:
  // 40 in the 20 ms this loop takes unloaded, and on a loaded machine, where
  // the loop takes longer, as many more as its time holds. Those are allowed.
  if (before < 0) GTEST_SKIP() << "no /proc/self/task here";
  if (seconds > 0.2) GTEST_SKIP() << "too slow to tell (" << seconds << " s)";
  constexpr double kEngineLooksEvery_s = 500e-6;
  EXPECT_LT(double(switches), kTasks / 2 + seconds / kEngineLooksEvery_s);
}

TEST(ProgressEngine, ACollectiveLeftToACallerThatDoesNotComeStartsByItself) {
  RecordingExecutor ex;
  ProgressEngine engine("test", ex, nullptr);
  for (int64_t i = 0; i < 20; ++i) submit(engine, i, 4096)->wait();  // the caller waits at once
  const double t0 = now_seconds();
  WorkPtr w = submit(engine, 20, 4096);  // now it does not
  while (!w->test() && now_seconds() - t0 < 10) std::this_thread::sleep_for(std::chrono::microseconds(50));
  ASSERT_TRUE(w->test()) << "a collective nobody waits for never started";
  std::lock_guard lock(ex.mu);
  EXPECT_NE(ex.runs.back().thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace shardtrain::comm
