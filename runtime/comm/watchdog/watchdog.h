// The watchdog: ends the job, with a one-line reason on stderr, when a
// collective does not complete within CommOptions::timeout_s or fails, rather
// than let ranks wait forever.
//
// One thread per world communicator (shared by its sub-communicators), on a
// duplicate of the world communicator of its own. Every 10 ms it answers
// other ranks' queries and checks the running collective of each monitored
// communicator. A collective close to the timeout makes it ask every rank for
// its monitors' snapshots (CommMonitor), so that the answers are in when the
// timeout passes; if the collective is still not complete then (or an engine
// reports a failure), it prints who never arrived and what they do instead
// (watchdog_report.h) and calls MPI_Abort, with a bound on how long the
// process waits for MPI_Abort to end it.
//
// Why point-to-point queries answered by a thread, rather than reading the
// others' state from an MPI one-sided window: the answering thread runs
// while its rank's training thread is stuck in compute, the queries work over
// any transport (a one-sided window over TCP needs the target to progress
// anyway), and every wait is bounded (a dead rank simply does not answer).
#pragma once

#include "runtime/comm/watchdog/comm_monitor.h"

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace shardtrain::comm {

class Watchdog {
 public:
  // Collective over `world`, which it duplicates.
  explicit Watchdog(MPI_Comm world);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void add(std::shared_ptr<CommMonitor> monitor);

  // A progress engine's collective failed (an MPI error, a message of the
  // wrong size): the same report as a timeout, then the job ends.
  [[noreturn]] void fail(const CommMonitor& monitor, const OpRecord& op, const std::string& what);

  // Stops the thread and frees the communicator; MPI must still be
  // initialized. Idempotent.
  void stop();

  // How long a stuck rank waits for the others' answers: it asks this long
  // before the timeout (at most half of it).
  static constexpr double kAnswerWait_s = 3.0;
  // How long a rank waits for MPI_Abort to end it before it exits itself (a
  // launcher daemon that cannot be reached may never do it).
  static constexpr double kAbortBound_s = 10.0;

 private:
  struct Reply;
  struct Failure {
    const CommMonitor* monitor;
    OpRecord op;
    std::string what;
  };

  void loop();
  void serve_queries();
  void check_timeouts();
  // `peers`: the snapshots already asked for (null: asks now).
  [[noreturn]] void diagnose_and_abort(const CommMonitor& monitor, const OpRecord& op, const std::string& what,
                                       const std::vector<std::optional<MonitorSnapshot>>* peers = nullptr);
  // A collective close to the timeout: asks the peers, then waits for the
  // timeout to pass; diagnosed and the job ended unless it completed by then.
  void diagnose_timeout(const CommMonitor& monitor, const MonitorSnapshot& stuck);
  // Waits for the answers until `deadline` (now_seconds()) at the latest.
  std::vector<std::optional<MonitorSnapshot>> ask_everyone(const CommMonitor& monitor, double deadline);
  void fill(Reply& reply);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<CommMonitor>> monitors_;
  std::optional<Failure> failure_;
  bool stop_ = false;
  std::atomic<bool> lower_rank_diagnosing_{false};
  struct PendingReply;
  std::vector<std::unique_ptr<PendingReply>> pending_replies_;  // the thread's own
  // Answer buffers of a request that could not be settled (ask_everyone).
  std::vector<std::unique_ptr<std::vector<Reply>>> abandoned_replies_;
  std::thread thread_;
};

}  // namespace shardtrain::comm
