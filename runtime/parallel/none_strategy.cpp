#include "runtime/parallel/none_strategy.h"

#include "runtime/core/error.h"
#include "runtime/optim/clip.h"
#include "runtime/parallel/optimizer_span.h"

namespace shardtrain::parallel {

void NoneSpec::check(const Topology& t) const {
  ST_CHECK(t.ranks == 1,
           "parallel.strategy = \"none\" trains on one rank, but the job has {} ranks (use parallel.strategy = "
           "\"ddp\", \"zero1\" or \"fsdp\")",
           t.ranks);
}

std::vector<ParallelOptions> NoneSpec::plan_variants(const ParallelOptions& base, const Topology& t) const {
  if (t.ranks > 1) return {};
  ParallelOptions o = base;
  o.strategy = "none";
  return {o};
}

StrategyMemory NoneSpec::memory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  return replicated_memory(flat, in.state_floats_per_param);
}

std::unique_ptr<Strategy> NoneSpec::start(nn::Model& model, comm::Communicator*) const {
  return std::make_unique<NoneStrategy>(model);
}

std::unique_ptr<optim::Optimizer> NoneStrategy::make_optimizer(const optim::OptimizerConfig& config,
                                                               const std::vector<optim::ParamRange>& full) {
  return optim::make_optimizer(config, model_.flat().numel(), full, model_.device());
}

void NoneStrategy::update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) {
  replicated_update(model_.flat(), optimizer, lr, clip_grad_norm, optimizer_s);
}

void NoneStrategy::device_update(optim::Optimizer& optimizer, float lr, double clip_grad_norm) {
  replicated_device_update(model_.flat(), optimizer, lr, clip_grad_norm);
}

CheckpointView NoneStrategy::checkpoint_view() { return replicated_view(model_.flat(), 0, 1); }

StrategyMemory replicated_memory(const nn::FlatParameters& flat, int state_floats_per_param) {
  constexpr int64_t f32 = 4;
  StrategyMemory m;
  m.components = {{"parameters", flat.numel() * f32},
                  {"gradients", flat.numel() * f32},
                  {"optimizer state", flat.numel() * f32 * state_floats_per_param}};
  m.persistent_bytes = flat.numel() * f32 * (2 + state_floats_per_param);
  return m;
}

void replicated_device_update(const nn::FlatParameters& flat, optim::Optimizer& optimizer, float lr,
                              double clip_grad_norm) {
  if (clip_grad_norm > 0) optim::clip_grad_norm(flat.grads(), clip_grad_norm);
  optimizer.update(flat.params(), flat.grads(), lr, 0, flat.params().numel());
}

void replicated_update(const nn::FlatParameters& flat, optim::Optimizer& optimizer, float lr, double clip_grad_norm,
                       double& optimizer_s) {
  timed_optimizer(optimizer_s, -1, [&] {
    replicated_device_update(flat, optimizer, lr, clip_grad_norm);
    optimizer.finish_step();
  });
}

CheckpointView replicated_view(const nn::FlatParameters& flat, int rank, int world) {
  return {flat.params(), replicated_slice(flat.numel(), rank, world), whole_buffer(flat.numel())};
}

}  // namespace shardtrain::parallel
