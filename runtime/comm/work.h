// Work: the handle of one issued collective. The progress engine completes
// it; the issuing thread waits on it. Its timestamps are what the telemetry
// reports, separating the two reasons a collective takes time:
//   started -> arrived   waiting for the other ranks to issue it (a straggler
//                        or load imbalance, not the network)
//   arrived -> finished  moving and reducing data (communication proper)
// and, of the time a caller spent blocked in wait(), how much was spent after
// this rank's engine had started the collective but before the last rank
// arrived (blocked_waiting_for_peers: another rank is late) and the rest
// (blocked_on_transfer: this rank's own communication, queue and transfer:
// the exposed communication).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace shardtrain::comm {

class Work;

// Lets the thread waiting for a Work run its collective itself when no other
// thread is running any (ProgressEngine).
class WorkHelper {
 public:
  virtual ~WorkHelper() = default;
  // True if it ran `work` (and everything issued before it) to completion.
  virtual bool help(const Work& work) = 0;
};

class Work {
 public:
  Work(std::string op, int64_t seq, int64_t bytes, std::shared_ptr<WorkHelper> helper = nullptr)
      : op_(std::move(op)), seq_(seq), bytes_(bytes), helper_(std::move(helper)) {}

  // Blocks until the collective has completed; rethrows its error. The time
  // spent blocked is added to blocked_seconds(). If nothing is running on
  // its communicator yet, runs it (and what was issued before it) on this
  // thread instead of handing it to the progress engine and back.
  void wait();
  // True once completed (rethrows its error); never blocks.
  bool test();

  const std::string& op() const { return op_; }                // "allreduce", ...
  int64_t seq() const { return seq_; }                         // issue order on its communicator, from 0
  int64_t bytes() const { return bytes_; }                     // payload bytes of this rank
  const std::string& algorithm() const { return algorithm_; }  // "ring", "mpi", ...
  double started_at() const { return started_; }               // now_seconds() when execution began
  // When every rank had issued it. Algorithms that learn it (the arrival
  // check before the MPI library's collectives) set it; for the others it
  // equals started_at (waiting for peers then counts as communication).
  double arrived_at() const { return arrived_; }
  double finished_at() const { return finished_; }
  double blocked_seconds() const { return blocked_; }
  double blocked_waiting_for_peers() const { return blocked_peers_; }
  double blocked_on_transfer() const { return blocked_ - blocked_peers_; }

  // Called by the progress engine.
  void mark_started(const std::string& algorithm, double t);
  void mark_arrived(double t);
  void mark_finished(double t, std::exception_ptr error = nullptr);

 private:
  std::string op_;
  int64_t seq_;
  int64_t bytes_;
  std::shared_ptr<WorkHelper> helper_;
  std::string algorithm_;
  double started_ = 0, arrived_ = 0, finished_ = 0, blocked_ = 0, blocked_peers_ = 0;
  static constexpr double kSpinSeconds = 50e-6;  // see wait()
  std::atomic<bool> done_flag_{false};           // done_, readable without the lock
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace shardtrain::comm
