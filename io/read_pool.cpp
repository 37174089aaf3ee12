#include "io/read_pool.h"

#include "runtime/core/error.h"

#include <sched.h>

namespace shardtrain::io {

ReadPool::ReadPool(int threads) {
  ST_CHECK(threads >= 1 && threads <= 1024, "a read pool needs 1 to 1024 threads, got {}", threads);
  threads_.reserve(size_t(threads));
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
}

ReadPool::~ReadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ReadPool::run(int64_t count, const std::function<void(int64_t)>& task) {
  if (count <= 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &task;
  count_ = count;
  next_ = finished_ = 0;
  error_index_ = -1;
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [&] { return finished_ == count_; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ReadPool::work() {
  // As the loader's I/O thread (io/stream_loader.cpp): a reader woken when
  // its read completes must not preempt the training thread at once.
  const sched_param batch_param{};
  sched_setscheduler(0, SCHED_BATCH, &batch_param);
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return quit_ || (generation_ != seen && next_ < count_); });
    if (quit_) return;
    while (next_ < count_) {
      const int64_t i = next_++;
      const std::function<void(int64_t)>& task = *task_;
      lock.unlock();
      std::exception_ptr failed;
      try {
        task(i);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed && (error_index_ < 0 || i < error_index_)) {
        error_index_ = i;
        error_ = failed;
      }
      if (++finished_ == count_) done_.notify_all();
    }
    seen = generation_;
  }
}

}  // namespace shardtrain::io
