// ZeRO stage 1 (parallel.strategy = "zero1", DeepSpeed's stage 1, as in
// llm.c): gradients are all-reduced in DDP's buckets while backward runs
// (the Ddp inside does that, with [parallel.ddp]'s options); the optimizer
// state is sharded. Rank r owns slice r of the flat buffer (an even split,
// aligned to 64 bytes), keeps optimizer state for it alone, updates only its
// parameters, and the updated slices are all-gathered, in place, before the
// next forward. Each element is updated from the same reduced gradient with
// the same arithmetic as under DDP, so the parameters after every step are
// DDP's bit for bit; what changes is 1/N of the optimizer state per rank
// and an all-gather of (N-1)/N of the parameters per step.
//
// The model's parameter buffer is padded to ranks x slice elements (the
// flat parameters become a view of its front), so that the all-gather lands
// in it directly. The all-gather runs after the update, exposed: nothing
// computes until the next forward.
#pragma once

#include "runtime/parallel/ddp.h"
#include "runtime/parallel/strategy.h"

namespace shardtrain::parallel {

class Zero1Spec final : public StrategySpec {
 public:
  explicit Zero1Spec(const ParallelOptions& options) : options_(options.ddp) {}
  std::string name() const override { return "zero1"; }
  std::string options_section() const override { return "ddp"; }  // its gradient buckets
  StrategyMemory memory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  WireTheory wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  int64_t collectives_per_step(const nn::FlatParameters& flat, int micro_batches) const override;
  CommLayout comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  std::unique_ptr<Strategy> start(nn::Model& model, comm::Communicator* comm) const override;

 private:
  DdpOptions options_;
};

class Zero1 final : public Strategy {
 public:
  Zero1(nn::Model& model, comm::Communicator& comm, const DdpOptions& options);

  // Elements of the flat buffer per slice: the flat buffer over `ranks`,
  // rounded up to 64 bytes.
  static int64_t slice_numel(int64_t flat_numel, int ranks);

  std::string describe(const PlanInputs& in) const override;
  void broadcast_parameters() override { ddp_.broadcast_parameters(); }
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config,
                                                   const std::vector<optim::ParamRange>& full) override;
  void set_sync(bool sync) override { ddp_.set_sync(sync); }
  bool hooks_capturable(bool sync) const override { return ddp_.hooks_capturable(sync); }
  void before_backward(int block) override { ddp_.before_backward(block); }
  void after_backward(int block) override { ddp_.after_backward(block); }
  void update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) override;
  CommStats take_stats() override;
  CheckpointView checkpoint_view() override;
  void loaded() override;

 private:
  Tensor own(const Tensor& flat_buffer) const;  // this rank's slice of a flat buffer
  void gather_parameters();

  nn::Model& model_;
  comm::Communicator& comm_;
  Ddp ddp_;
  int64_t slice_ = 0;
  int64_t begin_ = 0, end_ = 0;  // this rank's elements of the flat buffer
  Tensor padded_;                // the parameters, ranks x slice elements
  CommStats stats_;              // the all-gathers'
};

}  // namespace shardtrain::parallel
