// RateLimiter: a token bucket on the steady clock (io/rate_limiter.h).
#include "io/rate_limiter.h"
#include "runtime/core/clock.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace shardtrain::io {

RateLimiter::RateLimiter(double bytes_per_s) : rate_(bytes_per_s), last_(now_seconds()) {}

void RateLimiter::acquire(int64_t bytes, const std::atomic<bool>* stop) {
  if (rate_ <= 0 || bytes <= 0) return;
  double wait = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_seconds();
    // Refill for the time since the last request, holding at most this
    // request's worth (no burst beyond one block after an idle period).
    allowance_ = std::min(allowance_ + (now - last_) * rate_, double(bytes));
    last_ = now;
    allowance_ -= double(bytes);
    // A debt is paid by sleeping; time overslept is refilled by the next call.
    if (allowance_ < 0) wait = -allowance_ / rate_;
  }
  if (wait <= 0) return;
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(wait));
  constexpr auto kSlice = std::chrono::milliseconds(50);
  while (clock::now() < deadline) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return;
    std::this_thread::sleep_until(std::min(deadline, clock::now() + kSlice));
  }
}

}  // namespace shardtrain::io
