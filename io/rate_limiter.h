// A byte-rate limit shared by copying threads (the stager's copier, the S3
// client's ranged GETs).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace shardtrain::io {

// Bytes per second allowed through, as a token bucket on the steady clock,
// refilled continuously, holding at most one request's worth (one block) so
// that an idle period buys no burst beyond one block. The first request waits
// too: n blocks take n * block / rate. acquire sleeps, never spins.
// rate <= 0: unlimited (acquire never waits). Thread-safe.
class RateLimiter {
 public:
  explicit RateLimiter(double bytes_per_s);
  // Blocks until `bytes` may pass, or `stop` (may be null) becomes true
  // (checked every 50 ms while waiting).
  void acquire(int64_t bytes, const std::atomic<bool>* stop = nullptr);
  double bytes_per_s() const { return rate_; }

 private:
  double rate_;
  std::mutex mu_;
  double allowance_ = 0;  // bytes that may pass now (negative: owed)
  double last_ = 0;       // seconds, steady clock (runtime/core/clock.h)
};

}  // namespace shardtrain::io
