#include "io/read_pool.h"

#include "runtime/core/error.h"

#include <sched.h>

#include <algorithm>

namespace shardtrain::io {

ReadPool::ReadPool(int threads) {
  ST_CHECK(threads >= 1 && threads <= 1024, "a read pool needs 1 to 1024 threads, got {}", threads);
  threads_.reserve(size_t(threads));
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
}

ReadPool::~ReadPool() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] {
      return std::all_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.finished == j.count; });
    });
    quit_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

ReadPool::Ticket ReadPool::submit(int64_t count, std::function<void(int64_t)> task) {
  std::lock_guard<std::mutex> lock(mu_);
  Job& job = jobs_.emplace_back();
  job.ticket = ++last_;
  job.count = std::max<int64_t>(0, count);
  job.task = std::move(task);
  wake_.notify_all();
  return job.ticket;
}

void ReadPool::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  auto job = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.ticket == ticket; });
  ST_ASSERT(job != jobs_.end());
  done_.wait(lock, [&] { return job->finished == job->count; });
  std::exception_ptr error = job->error;
  jobs_.erase(job);
  if (error) std::rethrow_exception(error);
}

void ReadPool::work() {
  // As the loader's I/O thread (io/stream_loader.cpp): a reader woken when
  // its read completes must not preempt the training thread at once.
  const sched_param batch_param{};
  sched_setscheduler(0, SCHED_BATCH, &batch_param);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // The oldest job with a task not yet taken.
    auto job = jobs_.end();
    wake_.wait(lock, [&] {
      job = std::find_if(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.next < j.count; });
      return quit_ || job != jobs_.end();
    });
    if (job == jobs_.end()) return;  // quit, with nothing left to run
    const int64_t i = job->next++;
    lock.unlock();
    std::exception_ptr failed;
    try {
      job->task(i);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed && (job->error_index < 0 || i < job->error_index)) {
      job->error_index = i;
      job->error = failed;
    }
    if (++job->finished == job->count) done_.notify_all();
  }
}

}  // namespace shardtrain::io
