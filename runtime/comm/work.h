// Work: the handle of one issued collective. The progress engine completes
// it; the issuing thread waits on it. Its timestamps are what the telemetry
// reports: communication time (started -> finished on the progress engine)
// and exposed communication time (the time a caller spent blocked in wait()).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace shardtrain::comm {

class Work {
 public:
  Work(std::string op, int64_t seq, int64_t bytes) : op_(std::move(op)), seq_(seq), bytes_(bytes) {}

  // Blocks until the collective has completed; rethrows its error. The time
  // spent blocked is added to blocked_seconds().
  void wait();
  // True once completed (rethrows its error); never blocks.
  bool test();

  const std::string& op() const { return op_; }  // "allreduce", ...
  int64_t seq() const { return seq_; }            // issue order on its communicator, from 0
  int64_t bytes() const { return bytes_; }        // payload bytes of this rank
  const std::string& algorithm() const { return algorithm_; }  // "ring", "mpi", ...
  double started_at() const { return started_; }   // now_seconds() when execution began
  double finished_at() const { return finished_; }
  double blocked_seconds() const { return blocked_; }

  // Called by the progress engine.
  void mark_started(const std::string& algorithm, double t);
  void mark_finished(double t, std::exception_ptr error = nullptr);

 private:
  std::string op_;
  int64_t seq_;
  int64_t bytes_;
  std::string algorithm_;
  double started_ = 0, finished_ = 0, blocked_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace shardtrain::comm
