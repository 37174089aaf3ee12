// The progress engine: one thread per communicator that makes all of that
// communicator's MPI calls and runs its collectives one at a time, strictly
// in issue order (every rank issues the same sequence, so every rank runs the
// same collective at the same time, and MPI never sees two threads on one
// communicator). Small all-reduces queued behind each other may run as one
// group (Executor::group), which changes nothing of the above.
//
// One exception to "one thread": a caller that waits for a collective which
// has not started while nothing runs takes the queue up to it and runs it on
// its own thread (help(), from Work::wait()); the engine's thread meanwhile
// runs nothing (busy_), so there is still one thread at a time.
//
// A caller that waits for each collective as soon as it issues it (a loss, a
// metric, one at a time) would still lose that race: waking the engine for
// the collective schedules it at once (its priority is raised), it takes the
// collective, and the caller waits for the hand-off back; with more threads
// than cores that costs several times the collective itself. So a lone
// collective of up to kDeferBytes whose kind (op and size) the caller waited
// for at once last time is left to it (deferred, no wake-up); a prefetch
// (FSDP's all-gathers, issued a block ahead) is not. The engine, which then
// sleeps at most kDefer_s at a time, takes it if the caller has not come for
// it within kDefer_s, and forgets that kind: no collective waits more than
// about twice that to start (the caller may be descheduled, or not wait).
//
// Idle, the thread sleeps on a condition variable (after a short poll when
// collectives come back to back: loop()). Running a collective it polls
// (MpiTransport's Backoff), so it costs CPU only while data moves. The thread starts with the
// first collective: communicators never used (most node() and cross_node())
// cost no thread.
//
// A task is plain data (no closure): queuing one allocates nothing once the
// queue has grown, and the engine hands its references to finished Works back
// to the issuing thread (dropped at its next submit), so that what the caller
// allocated is freed on the caller's thread. (With closures freed on the
// engine, malloc's arena lock bounced between the two threads on every
// collective, a large share of a small all-reduce's cost.)
#pragma once

#include "runtime/comm/watchdog/comm_monitor.h"
#include "runtime/comm/work.h"
#include "runtime/core/tensor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace shardtrain::comm {

struct Task {
  WorkPtr work;
  OpRecord record;  // what it is; record.algorithm is what Work::algorithm() says
  // The arguments, interpreted by the Executor. The tensors are held until
  // the collective completes.
  Tensor a, b;
  float scale = 1.0f;
  int root = -1;
  int algorithm = 0;
};

// Runs tasks on the engine's thread, or a waiting caller's (the communicator).
class Executor {
 public:
  virtual ~Executor() = default;
  // Called in issue order before execute(), up to a few tasks ahead (then
  // `running` is the task about to run): a chance to post messages early
  // (ArrivalBarrier). Returning false defers it (it is offered again later;
  // with running == nullptr it must return true).
  virtual bool prepare(const Task& /*task*/, const Task* /*running*/) { return true; }
  // How many of `queued` (the next task to run, then the tasks already queued
  // behind it, in issue order) to run together as one execute() (coalescing):
  // at least 1. Only what is queued is offered: the engine never waits for
  // more.
  virtual size_t group(std::span<const Task> /*queued*/) { return 1; }
  // Runs `tasks` (one, or a group). They complete together: an exception
  // fails them all.
  virtual void execute(std::span<Task> tasks) = 0;
};

// False once an engine thread could not raise its priority (no
// CAP_SYS_NICE): then collectives may wait for the scheduler when ranks fill
// every core. Reported in the run log.
bool engine_priority_raised();

class ProgressEngine {
 public:
  // `monitor` (may be null) hears when each task starts and finishes. A task
  // that throws completes its Work with the error.
  ProgressEngine(std::string name, Executor& executor, std::shared_ptr<CommMonitor> monitor);
  // Runs what is queued, then stops (stop()).
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Queues `task` behind every task submitted before it.
  void submit(Task&& task);
  // What a task's Work uses to run it on the waiting thread (Work::wait).
  std::shared_ptr<WorkHelper> helper() const { return helper_; }
  // Runs the queued tasks, then joins the thread. Idempotent; submit() after
  // it is an error.
  void stop();

 private:
  // Valid while the engine is: stop() detaches it, waiting for a helper.
  struct Helper final : WorkHelper {
    bool help(const Work& work) override;
    std::mutex mu;
    ProgressEngine* engine = nullptr;
  };

  void loop();
  // Runs the queued tasks up to and including `work`'s on the calling
  // thread, if no thread is running tasks and it is still queued; returns
  // whether it did. A caller that waits for a collective right after issuing
  // it (a loss, a metric, one-at-a-time use) then runs it without the two
  // thread switches of a hand-off to the engine and back.
  bool help(const Work& work);
  void run_batch(std::vector<Task>& batch, std::vector<WorkPtr>& finished);
  void run(std::span<Task> tasks);

  static constexpr size_t kLookahead = 4;       // tasks prepared ahead of the running one
  static constexpr double kIdlePoll_s = 50e-6;  // see loop()
  // How long a deferred collective (see the top) is its caller's to run.
  static constexpr double kDefer_s = 500e-6;
  static constexpr int64_t kDeferBytes = 256 << 10;
  // Without a collective for this long, the engine sleeps until woken (a
  // step's compute after its loss all-reduce is not woken into every 0.5 ms).
  static constexpr double kCallerRunsIdle_s = 2e-3;

  const std::string name_;
  Executor& executor_;
  const std::shared_ptr<CommMonitor> monitor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Task> queue_;  // swapped with the engine's batch: capacity is reused
  bool sleeping_ = false;    // the engine waits on cv_: submit() must notify
  bool polling_ = false;     // the engine polls queued_: submit() may yield
  std::atomic<double> last_submit_at_{-1};
  double last_activity() const {
    return std::max(last_submit_at_.load(std::memory_order_relaxed), last_help_at_.load(std::memory_order_relaxed));
  }
  std::atomic<bool> queued_{false};       // queue_ is not empty (polled without the lock)
  std::atomic<double> last_help_at_{-1};  // when a caller last entered help()
  std::vector<WorkPtr> retired_;          // finished, released by the issuing thread
  bool stopping_ = false;
  bool busy_ = false;  // a thread (the engine's or a helper) is running tasks
  // The kinds of collective (op, bytes) last waited for at once: a few, the
  // oldest replaced.
  struct Kind {
    std::string op;
    int64_t bytes;
  };
  bool waited_at_once(const std::string& op, int64_t bytes) const;
  void remember(const std::string& op, int64_t bytes, bool at_once);
  std::vector<Kind> at_once_;
  bool caller_runs_ = false;              // the last collective waited for was a kind waited for at once
  bool timed_sleep_ = false;              // the engine sleeps at most kDefer_s: it will look again
  double deferred_at_ = -1;               // when the lone queued task was left to its caller; -1: none
  const Work* last_submitted_ = nullptr;  // compared with, never used
  std::vector<Task> help_batch_;          // the helper's batch (one at a time: busy_)
  std::shared_ptr<Helper> helper_;
  std::thread thread_;
};

}  // namespace shardtrain::comm
