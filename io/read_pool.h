// A fixed set of threads that keeps many reads in flight: storage answers
// random requests at its rate only when it has many to work on (an NVMe
// or virtual disk: queue depth 16 reads several times faster than depth 1),
// and one I/O thread with synchronous reads has only ever one. The loader's
// I/O thread submits a batch's reads and collects them later, so that the
// next batch's reads queue behind the current one's instead of waiting for
// its last read; the pool threads call no HDF5 (it is not thread-safe
// here), only what the task does.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace shardtrain::io {

class ReadPool {
 public:
  explicit ReadPool(int threads);
  ~ReadPool();  // waits for every submitted task
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  int threads() const { return int(threads_.size()); }

  // A submitted job: task(i) for every i in [0, count), in submission order
  // across jobs, at most threads() at a time.
  using Ticket = uint64_t;
  // The task must stay valid until wait() returns for this ticket.
  Ticket submit(int64_t count, std::function<void(int64_t)> task);
  // Returns when every task of the job is done. When tasks threw, every
  // task still ran, and the exception of the lowest i is rethrown.
  void wait(Ticket ticket);
  void run(int64_t count, std::function<void(int64_t)> task) { wait(submit(count, std::move(task))); }

 private:
  struct Job {
    Ticket ticket = 0;
    int64_t count = 0, next = 0, finished = 0;
    std::function<void(int64_t)> task;
    int64_t error_index = -1;
    std::exception_ptr error;
  };
  void work();

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::list<Job> jobs_;  // stable addresses: a worker runs a task without the lock
  Ticket last_ = 0;
  bool quit_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace shardtrain::io
