// DDP: data parallelism with bucketed gradient all-reduce overlapped with
// backward (the semantics of PyTorch's c10d Reducer, at Block granularity).
//
// Buckets are contiguous ranges of the model's flat gradient buffer made of
// whole Blocks in reverse Block order (the order backward produces them): the
// first bucket holds up to first_bucket_mb, the others up to bucket_mb; a
// Block larger than the cap is a bucket of its own. Backward writes gradients
// straight into the buffer, so a bucket is a view, never a copy. As soon as
// the last Block of a bucket finishes its backward, the bucket's all-reduce is
// issued (buckets complete, and so launch, strictly in bucket order); the
// step waits for all of them only before the optimizer.
//
// Bucket batches (bucket_batch = k > 1): a complete bucket waits for the next
// k - 1 and the k are issued together, as one group of the communicator
// (Communicator::begin_group: one fused NCCL launch instead of k, at the cost
// of starting the batch's first reduction when its last bucket is ready).
// The last bucket, the one holding Block 0, always closes its batch. The
// values reduced are the same as with k = 1; only the launches change.
//
// Reduce-scattered buckets (scatter_into, ZeRO-1): each bucket is reduced
// into this rank's chunk of it instead of everywhere, for half the bytes.
//
// Averaging costs nothing: the loss gradient is already scaled by
// 1/global_batch on every rank, so the sum over ranks is the gradient of the
// global mean loss, exact also when ranks hold slices differing by a sample.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/nn/model.h"
#include "runtime/parallel/comm_stats.h"
#include "runtime/parallel/ddp_options.h"
#include "runtime/parallel/shard_layout.h"
#include "runtime/parallel/strategy.h"

#include <string>
#include <vector>

namespace shardtrain::parallel {

struct Bucket {
  int first_block = 0, last_block = 0;  // blocks [first, last] in forward numbering
  int64_t offset = 0, numel = 0;        // range of the flat gradient buffer
};

class DdpSpec final : public StrategySpec {
 public:
  explicit DdpSpec(const ParallelOptions& options) : options_(options.ddp) {}
  std::string name() const override { return "ddp"; }
  std::string options_section() const override { return "ddp"; }
  StrategyMemory memory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  WireTheory wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  int64_t collectives_per_step(const nn::FlatParameters& flat, int micro_batches) const override;
  CommLayout comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  std::unique_ptr<Strategy> start(nn::Model& model, comm::Communicator* comm) const override;

 private:
  DdpOptions options_;
};

// DDP's buckets as CommLayout lists them (ddp and zero1).
std::vector<DdpBucketLayout> bucket_layout(const nn::FlatParameters& flat, const DdpOptions& options);

class Ddp final : public Strategy {
 public:
  Ddp(nn::Model& model, comm::Communicator& comm, const DdpOptions& options);

  // The buckets a Ddp over these parameters would use (a pure function).
  static std::vector<Bucket> plan_buckets(const nn::FlatParameters& flat, const DdpOptions& options);

  std::string describe(const PlanInputs& in) const override;
  // Checks that every rank built the same model (an error naming the ranks
  // that differ, raised on every rank), then copies rank 0's parameters to all.
  void broadcast_parameters() override;
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config,
                                                   const std::vector<optim::ParamRange>& full) override;

  // sync = false: the coming backward only accumulates gradients locally
  // (no_sync, for gradient accumulation); the next synced backward reduces
  // the sum.
  void set_sync(bool sync) override { sync_ = sync; }
  // Without sync the hooks only count a bucket's blocks (host work): a
  // replayed micro-batch skips them, and the next backward's first hook
  // starts the count again.
  bool hooks_capturable(bool sync) const override { return !sync; }

  void before_backward(int block) override;
  void after_backward(int block) override;

  // Each bucket's parameters are updated as soon as its all-reduce is done,
  // so the optimizer overlaps the buckets still in flight (the last one,
  // launched after the final Block's backward, above all); with clipping,
  // after every bucket (the norm is over all gradients).
  void update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) override;

  // ZeRO-1: reduce-scatter each bucket instead of all-reducing it. `layout`
  // is a ShardLayout over the buckets in flat order (bucket i its range
  // scatter_slot(i), counted from the end): rank r
  // receives chunk r of bucket i's range, padded to size() chunks, at chunk
  // i of `shard_grads` (its elements past the bucket's end, padding, are
  // zeroed when the bucket is waited for). `grads` is the model's flat
  // gradient buffer with room past its end for the last bucket's padding:
  // a bucket's padding is read from the elements after it, which backward
  // wrote before it (buckets run from the end of the buffer to its start).
  // Call once, before the first backward.
  void scatter_into(const ShardLayout& layout, const Tensor& grads, const Tensor& shard_grads);

  // Blocks until bucket b's reduction (if launched this step) completed;
  // its gradients (or this rank's chunk of them) are then the global ones. Buckets complete in order, so
  // the optimizer can update bucket 0's parameters while later buckets are
  // still being reduced.
  void wait_bucket(size_t b);
  // All buckets: call before anything that needs every gradient (clipping).
  void wait_gradients();

  CommStats take_stats() override;
  CheckpointView checkpoint_view() override;
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const DdpOptions& options() const { return options_; }

 private:
  void launch(size_t bucket);
  void launch_ready();            // the buckets in ready_, as one group
  void scattered(size_t bucket);  // bucket's reduce-scatter done: its chunk in shard_grads_
  int scatter_slot(size_t bucket) const { return int(buckets_.size() - 1 - bucket); }

  nn::Model& model_;
  comm::Communicator& comm_;
  DdpOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_block_;
  std::vector<int> pending_;              // blocks of each bucket not yet through backward
  std::vector<comm::WorkPtr> works_;      // per bucket: this step's all-reduce, if launched
  std::vector<size_t> ready_;             // complete buckets of the batch not yet launched
  std::vector<Tensor> wire_;              // bf16 copies of the buckets (grad_dtype = bf16)
  const ShardLayout* scatter_ = nullptr;  // scatter_into's
  Tensor scatter_grads_, shard_grads_;
  bool sync_ = true;
  CommStats stats_;
  int comm_lane_ = -1;  // the trace's "comm engine" lane
};

}  // namespace shardtrain::parallel
