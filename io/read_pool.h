// A fixed set of threads that keeps many reads in flight: storage answers
// random requests at its rate only when it has many to work on (an NVMe
// or virtual disk: queue depth 16 reads several times faster than depth 1),
// and one I/O thread with synchronous reads has only ever one. The loader's
// I/O thread hands a batch's reads to run() and waits; the pool threads
// call no HDF5 (it is not thread-safe here), only what the task does.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardtrain::io {

class ReadPool {
 public:
  explicit ReadPool(int threads);
  ~ReadPool();
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  int threads() const { return int(threads_.size()); }
  // Calls task(i) for every i in [0, count) on the pool's threads, at most
  // threads() at a time, and returns when all are done. When tasks throw,
  // every task still runs, and the exception of the lowest i is rethrown.
  void run(int64_t count, const std::function<void(int64_t)>& task);

 private:
  void work();

  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t count_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool quit_ = false;
  int64_t error_index_ = -1;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace shardtrain::io
