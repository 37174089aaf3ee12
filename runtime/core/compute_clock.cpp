#include "runtime/core/compute_clock.h"

#include "runtime/core/clock.h"

#include <algorithm>
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
  // The last wake-up's lateness is time this kernel already had; never more
  // than the kernel itself.
  const double deadline = start + seconds - std::min(late_, seconds);
  sleep_until(deadline);
  const double end = now_seconds();
  late_ = std::max(0.0, end - deadline);
  return end - start;
}

ComputeClock& compute_clock() {
  static ComputeClock clock;
  return clock;
}

}  // namespace shardtrain
