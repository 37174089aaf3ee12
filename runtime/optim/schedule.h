// Learning-rate schedules: an optional linear warmup, then constant, cosine
// decay to min_lr over the run, or step decay by gamma every step_size steps.
#pragma once

#include "runtime/core/enum_names.h"

#include <array>
#include <cstdint>
#include <string>

namespace shardtrain::optim {

enum class ScheduleKind { constant, cosine, step };
inline std::span<const EnumName<ScheduleKind>> enum_names(ScheduleKind) {
  static constexpr std::array<EnumName<ScheduleKind>, 3> n = {
      {{ScheduleKind::constant, "constant"}, {ScheduleKind::cosine, "cosine"}, {ScheduleKind::step, "step"}}};
  return n;
}

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::constant;
  int64_t warmup_steps = 0;  // lr rises linearly from lr/warmup to lr
  float min_lr = 0.0f;       // cosine: the final learning rate
  int64_t step_size = 0;     // step: decay every this many steps
  float gamma = 0.1f;        // step: decay factor
};

// An Error naming the [schedule] key out of range for a peak rate of base_lr.
void validate(const ScheduleConfig& config, float base_lr);

class LrSchedule {
 public:
  // total_steps: the steps the run will take (cosine decays over them).
  LrSchedule(const ScheduleConfig& config, float base_lr, int64_t total_steps);
  // Learning rate for 0-based step `step`.
  float at(int64_t step) const;

 private:
  ScheduleConfig config_;
  float base_lr_;
  int64_t total_steps_;
};

}  // namespace shardtrain::optim
