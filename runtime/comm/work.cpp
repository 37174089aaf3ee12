#include "runtime/comm/work.h"

#include "runtime/core/clock.h"

#include <algorithm>
#include <thread>

namespace shardtrain::comm {

void Work::wait() {
  std::unique_lock lock(mu_);
  if (!done_) {
    const double t0 = now_seconds();
    // A collective about to finish (the last small bucket of a backward)
    // completes within microseconds: spinning that long saves the sleep and
    // wake-up of the waiting thread, which costs tens of microseconds.
    lock.unlock();
    if (helper_ && !done_flag_.load(std::memory_order_acquire)) helper_->help(*this);
    while (!done_flag_.load(std::memory_order_acquire) && now_seconds() - t0 < kSpinSeconds)
      std::this_thread::yield();  // the engine may need this core to finish it
    lock.lock();
    cv_.wait(lock, [&] { return done_; });
    const double t1 = now_seconds();
    blocked_ += t1 - t0;
    blocked_peers_ += std::max(0.0, std::min(t1, arrived_) - t0);
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::test() {
  std::lock_guard lock(mu_);
  if (done_ && error_) std::rethrow_exception(error_);
  return done_;
}

void Work::mark_started(const std::string& algorithm, double t) {
  std::lock_guard lock(mu_);
  algorithm_ = algorithm;
  started_ = arrived_ = t;
}

void Work::mark_arrived(double t) {
  std::lock_guard lock(mu_);
  arrived_ = t;
}

void Work::mark_finished(double t, std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    finished_ = t;
    error_ = std::move(error);
    done_ = true;
    done_flag_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace shardtrain::comm
