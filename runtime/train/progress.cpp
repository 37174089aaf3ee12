#include "runtime/train/progress.h"

#include "runtime/core/clock.h"

#include <cmath>
#include <fmt/format.h>

namespace shardtrain::train {

std::string format_duration(double seconds) {
  const auto s = int64_t(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

Progress::Progress(int64_t total_steps, double every_s) : total_steps_(total_steps), every_s_(every_s) {}

std::string Progress::update(int64_t step, int64_t epoch, int64_t epochs, double loss, float lr, double samples_per_s,
                             double step_seconds_avg) {
  const double now = now_seconds();
  if (now - last_ < every_s_ && step != total_steps_) return "";
  last_ = now;
  const double eta = double(total_steps_ - step) * step_seconds_avg;
  return fmt::format("[train] epoch {}/{}  step {}/{}  loss {:.4f}  lr {:.4g}  {:.0f} samples/s  ETA {}", epoch + 1,
                     epochs, step, total_steps_, loss, lr, samples_per_s, format_duration(eta));
}

}  // namespace shardtrain::train
