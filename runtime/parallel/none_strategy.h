// parallel.strategy = "none": one rank trains alone. Nothing to communicate;
// the update clips and steps the whole flat buffer.
#pragma once

#include "runtime/parallel/strategy.h"

namespace shardtrain::parallel {

class NoneSpec final : public StrategySpec {
 public:
  explicit NoneSpec(const ParallelOptions&) {}
  std::string name() const override { return "none"; }
  void check(const Topology& t) const override;
  bool communicates() const override { return false; }
  std::vector<ParallelOptions> plan_variants(const ParallelOptions& base, const Topology& t) const override;
  StrategyMemory memory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  WireTheory wire_theory(const nn::FlatParameters&, const PlanInputs&) const override { return {}; }
  int64_t collectives_per_step(const nn::FlatParameters&, int) const override { return 0; }
  std::unique_ptr<Strategy> start(nn::Model& model, comm::Communicator* comm) const override;
};

class NoneStrategy final : public Strategy {
 public:
  explicit NoneStrategy(nn::Model& model) : model_(model) {}
  std::string describe(const PlanInputs&) const override { return {}; }
  void broadcast_parameters() override {}
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config,
                                                   const std::vector<optim::ParamRange>& full) override;
  void set_sync(bool) override {}
  bool hooks_capturable(bool /*sync*/) const override { return true; }
  void update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) override;
  bool update_capturable() const override { return true; }
  void device_update(optim::Optimizer& optimizer, float lr, double clip_grad_norm) override;
  CommStats take_stats() override { return {}; }
  CheckpointView checkpoint_view() override;

 private:
  nn::Model& model_;
};

// What a rank keeping the whole model holds (none, ddp): parameters,
// gradients and optimizer state of every element of the flat buffer.
StrategyMemory replicated_memory(const nn::FlatParameters& flat, int state_floats_per_param);
// The update of a rank holding every gradient: clip (when asked) and step;
// replicated_device_update is its device work alone (the step not counted).
void replicated_device_update(const nn::FlatParameters& flat, optim::Optimizer& optimizer, float lr,
                              double clip_grad_norm);
void replicated_update(const nn::FlatParameters& flat, optim::Optimizer& optimizer, float lr, double clip_grad_norm,
                       double& optimizer_s);
// A replicated model's checkpoint: each rank writes its slice, reads everything.
CheckpointView replicated_view(const nn::FlatParameters& flat, int rank, int world);

}  // namespace shardtrain::parallel
