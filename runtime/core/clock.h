// Monotonic time in seconds, for step timing, progress lines and benchmarks.
#pragma once

#include <chrono>

namespace shardtrain {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace shardtrain
