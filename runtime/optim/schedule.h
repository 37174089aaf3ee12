// Learning-rate schedules: an optional linear warmup, then constant, cosine
// decay to min_lr over the run, or step decay by gamma every step_size steps.
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::optim {

struct ScheduleConfig {
  std::string kind = "constant";  // "constant" | "cosine" | "step"
  int64_t warmup_steps = 0;       // lr rises linearly from lr/warmup to lr
  float min_lr = 0.0f;            // cosine: the final learning rate
  int64_t step_size = 0;          // step: decay every this many steps
  float gamma = 0.1f;             // step: decay factor
};

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
