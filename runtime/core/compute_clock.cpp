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
  // Earlier wake-ups' lateness is time this kernel already had. A kernel
  // shorter than what is owed does not sleep and passes the rest on, so a
  // run of kernels each shorter than a wake-up's lateness (an optimizer's
  // per-tensor updates) still adds up to its sum.
  const double credit = std::min(late_, seconds);
  late_ -= credit;
  if (seconds > credit) {
    const double deadline = start + seconds - credit;
    sleep_until(deadline);
    late_ += std::max(0.0, now_seconds() - deadline);
  }
  return now_seconds() - start;
}

ComputeClock& compute_clock() {
  static ComputeClock clock;
  return clock;
}

}  // namespace shardtrain
