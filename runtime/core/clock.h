// Monotonic time in seconds, for step timing, progress lines and benchmarks;
// and the wall clock's UTC time as text, for records and signed requests.
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace shardtrain {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The current UTC time in a strftime format, e.g. "%Y-%m-%dT%H:%M:%SZ" (the
// compiler checks the callers' formats).
[[gnu::format(strftime, 1, 0)]] inline std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[64];
  // The attribute checks each caller's literal instead.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const size_t n = std::strftime(buf, sizeof buf, format, &utc);
#pragma GCC diagnostic pop
  return std::string(buf, n);
}

}  // namespace shardtrain
