#include "runtime/comm/work.h"

#include "runtime/core/clock.h"

namespace shardtrain::comm {

void Work::wait() {
  std::unique_lock lock(mu_);
  if (!done_) {
    const double t0 = now_seconds();
    cv_.wait(lock, [&] { return done_; });
    blocked_ += now_seconds() - t0;
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
  started_ = t;
}

void Work::mark_finished(double t, std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    finished_ = t;
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

}  // namespace shardtrain::comm
