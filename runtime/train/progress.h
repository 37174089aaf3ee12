// The progress line of a long run: at most one line every `every_s` seconds,
// with step, epoch, loss, throughput and the estimated time left.
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::train {

// "1h02m", "3m12s", "41s"
std::string format_duration(double seconds);

class Progress {
 public:
  Progress(int64_t total_steps, double every_s);
  // Returns the line to print for this step, or "" when it is not yet time.
  std::string update(int64_t step, int64_t epoch, int64_t epochs, double loss, float lr, double samples_per_s,
                     double step_seconds_avg);

 private:
  int64_t total_steps_;
  double every_s_;
  double last_ = -1e300;
};

}  // namespace shardtrain::train
