#include "runtime/optim/schedule.h"

#include "runtime/core/error.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace shardtrain::optim {

void validate(const ScheduleConfig& config, float base_lr) {
  ST_CHECK(config.warmup_steps >= 0, "schedule.warmup_steps must not be negative, got {}", config.warmup_steps);
  ST_CHECK(config.kind != ScheduleKind::step || config.step_size > 0,
           "schedule.kind = \"step\" needs schedule.step_size > 0");
  ST_CHECK(config.min_lr >= 0 && config.min_lr <= base_lr, "schedule.min_lr must be in [0, optim.lr = {}], got {}",
           base_lr, config.min_lr);
  ST_CHECK(std::isfinite(config.gamma) && config.gamma > 0, "schedule.gamma must be positive and finite, got {}",
           config.gamma);
}

LrSchedule::LrSchedule(const ScheduleConfig& config, float base_lr, int64_t total_steps)
    : config_(config), base_lr_(base_lr), total_steps_(total_steps) {
  validate(config, base_lr);
}

float LrSchedule::at(int64_t step) const {
  if (step < config_.warmup_steps) return base_lr_ * float(step + 1) / float(config_.warmup_steps);
  if (config_.kind == ScheduleKind::cosine) {
    const int64_t span = std::max<int64_t>(1, total_steps_ - config_.warmup_steps);
    const double progress = std::min(1.0, double(step - config_.warmup_steps) / double(span));
    return float(config_.min_lr + (base_lr_ - config_.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  if (config_.kind == ScheduleKind::step)  // its steps count from the end of warmup, as cosine's progress does
  {
    const int64_t decays = (step - config_.warmup_steps) / config_.step_size;  // whole periods after warmup
    return float(base_lr_ * std::pow(double(config_.gamma), double(decays)));
  }
  return base_lr_;
}

}  // namespace shardtrain::optim
