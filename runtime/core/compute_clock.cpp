#include "runtime/core/compute_clock.h"

#include "runtime/core/clock.h"

#include <cerrno>
#include <ctime>

namespace shardtrain {

void sleep_until(double deadline_s) {
  // steady_clock (now_seconds) is CLOCK_MONOTONIC on Linux.
  timespec until{};
  until.tv_sec = time_t(deadline_s);
  until.tv_nsec = long((deadline_s - double(until.tv_sec)) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
}

double ComputeClock::run(double seconds) {
  const double start = now_seconds();
  if (start - deadline_ > kBackToBack) deadline_ = start;
  deadline_ += seconds;
  sleep_until(deadline_);
  return now_seconds() - start;
}

ComputeClock& compute_clock() {
  static ComputeClock clock;
  return clock;
}

}  // namespace shardtrain
