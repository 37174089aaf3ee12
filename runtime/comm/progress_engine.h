// The progress engine: one thread per communicator that makes all of that
// communicator's MPI calls and runs its collectives one at a time, strictly
// in issue order (every rank issues the same sequence, so every rank runs the
// same collective at the same time, and MPI never sees two threads on one
// communicator).
//
// Idle, the thread sleeps on a condition variable. Running a collective it
// polls (MpiTransport's Backoff), so it costs CPU only while data moves. The
// thread starts with the first collective: communicators never used (most
// node() and cross_node()) cost no thread.
//
// A task is plain data (no closure): queuing one allocates nothing once the
// queue has grown, and the engine hands its references to finished Works back
// to the issuing thread (dropped at its next submit), so that what the caller
// allocated is freed on the caller's thread. (With closures freed on the
// engine, malloc's arena lock bounced between the two threads on every
// collective: ~0.5 us per small collective, half of a 4 KiB all-reduce.)
#pragma once

#include "runtime/comm/comm_monitor.h"
#include "runtime/comm/work.h"
#include "runtime/core/tensor.h"

#include <condition_variable>
#include <memory>
#include <mutex>
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

// Runs a task on the engine's thread (the communicator).
class Executor {
 public:
  virtual ~Executor() = default;
  // Called in issue order before execute(), up to a few tasks ahead (then
  // `running` is the task about to run): a chance to post messages early
  // (ArrivalBarrier). Returning false defers it (it is offered again later;
  // with running == nullptr it must return true).
  virtual bool prepare(const Task& /*task*/, const Task* /*running*/) { return true; }
  virtual void execute(const Task& task) = 0;
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
  // Runs the queued tasks, then joins the thread. Idempotent; submit() after
  // it is an error.
  void stop();

 private:
  void loop();
  void run(Task& task);

  static constexpr size_t kLookahead = 4;  // tasks prepared ahead of the running one

  const std::string name_;
  Executor& executor_;
  const std::shared_ptr<CommMonitor> monitor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Task> queue_;  // swapped with the engine's batch: capacity is reused
  std::vector<WorkPtr> retired_;  // finished, released by the issuing thread
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace shardtrain::comm
