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
    // Waiting for peers: from when this rank's own engine started the
    // collective until every rank had. Before its own start, the wait is on
    // this rank's communication (a busy or slow engine): exposed, not peers.
    blocked_peers_ += std::max(0.0, std::min(t1, arrived_) - std::max(t0, started_));
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
