// GEMMs on bf16 operands (f32 accumulation) for a stretch of compute, on
// the CPU and the GPU alike: what FSDP's bf16 parameters switch on around
// each Block it gathers. enter() and leave() are separate calls (not a
// scope) because a strategy's hooks open the stretch before a Block computes
// and close it after; the setting before enter() comes back at leave().
#pragma once

namespace shardtrain {

class Bf16Gemms {
 public:
  void enter();
  void leave();

 private:
  bool active_ = false;
  int saved_cpu_ = 0, saved_gpu_ = 0;
};

}  // namespace shardtrain
