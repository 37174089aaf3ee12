// ZeRO stage 1 (parallel.strategy = "zero1", DeepSpeed's stage 1, laid out
// as Megatron-LM's distributed optimizer lays it out): DDP's gradient
// buckets, but each bucket is reduce-scattered while backward runs instead
// of all-reduced (Ddp::scatter_into): bucket i's range is padded to N equal
// chunks (a ShardLayout over the buckets) and rank r receives the reduced
// chunk r. Rank r keeps an f32 master copy of its chunks (its shard), the
// optimizer state of that shard alone, and updates it bucket by bucket as
// the reductions complete; then each bucket's updated chunks are
// all-gathered into the model's flat buffer, before the next forward. A rank
// sends (N-1)/N of the gradients and (N-1)/N of the parameters per step:
// DDP's 2(N-1)/N (with f32 gradients), where an all-reduce followed by an
// all-gather would send half as much again.
//
// Padding without copies: a bucket's padded range runs past its end into
// the bucket after it in the flat buffer (the one before it in bucket
// order), so the flat parameter and gradient buffers get room past their
// end for the last range's padding. The reduce-scatter reads that
// neighbour's gradients as padding (final by then; the padded sums land
// past the bucket's end, in chunks whose padding Ddp zeroes), and the
// all-gathers write padding into the neighbour's parameters: they are
// issued from the start of the flat buffer to its end, each correcting the
// padding the one before it wrote, and waited for together.
//
// Each element's reduced gradient is the sum of the ranks' gradients in the
// reduce-scatter's order rather than the all-reduce's, so the parameters
// equal DDP's bit for bit where the two sum in the same order (two ranks:
// one addition) and otherwise within rounding; clipping sums its norm over
// the shards.
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

  // The shards: the buckets of `options` over the flat buffer, each split
  // into `ranks` chunks, in flat order: bucket i is the layout's range
  // slot(i, buckets).
  static ShardLayout layout(const nn::FlatParameters& flat, const DdpOptions& options, int ranks);
  static int slot(size_t bucket, size_t buckets) { return int(buckets - 1 - bucket); }
  // Elements past the flat buffer's end that the last bucket's padding takes.
  static int64_t room(const ShardLayout& layout, int64_t flat_numel);

  std::string describe(const PlanInputs& in) const override;
  void broadcast_parameters() override;
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
  void clip_grad_norm(double max_norm);
  void take_shard();  // this rank's chunks of the flat parameters into shard_params_
  void gather_parameters();

  nn::Model& model_;
  comm::Communicator& comm_;
  Ddp ddp_;
  ShardLayout layout_;
  Tensor params_, grads_;              // the flat buffers with room past their end
  Tensor shard_params_, shard_grads_;  // this rank's chunks, bucket after bucket
  CommStats stats_;                    // the all-gathers'
};

}  // namespace shardtrain::parallel
