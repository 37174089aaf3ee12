// FSDP (ZeRO-3) at Block granularity over one shard group (a Communicator).
//
// Each rank owns 1/N of every Block's padded flat-parameter range
// (ShardLayout) as its f32 master copy, plus the matching gradient shard; the
// optimizer steps on that shard only (an Optimizer over shard_numel()
// elements with shard_optimizer_ranges()). Around the model's step:
//   forward   before_forward(b): all-gather Block b (issued earlier as a
//             prefetch, else now) and up to `prefetch` Blocks after it, wait
//             for b; after_forward(b): FULL_SHARD frees b (except the last
//             Block, whose backward comes next); SHARD_GRAD_OP keeps it.
//   backward  before_backward(b): b gathered (again, FULL_SHARD) with up to
//             `prefetch` earlier Blocks in flight; after_backward(b): the
//             Block's gradients are reduce-scattered (SUM: the loss is already
//             divided by the global batch, as for DDP) into the rank's
//             gradient shard, and b is freed.
//   HYBRID    FULL_SHARD within each node (the communicator's node()
//             group shards), replicated across nodes: once a Block's
//             reduce-scatter completes, its gradient chunk is all-reduced
//             (SUM) over cross_node(), the ranks holding the same shard on
//             the other nodes. Gathers never leave the node; across nodes
//             goes 2(R-1)/R of the shard's gradient bytes per step.
//   step      wait_gradients() (or per Block), then the optimizer on
//             shard_params()/shard_grads(); the next forward's all-gathers
//             bring the updated parameters to every rank.
// Gradients travel and are reduced in f32.
//
// What is held. Between steps a rank holds its parameter and gradient shards
// and the optimizer state of its shard; broadcast_parameters() (or the first
// forward) releases the model's full flat buffers. A gathered Block's layers
// are bound to the gather buffer itself (nn::Model::bind_block) and write
// their gradients straight into a gradient buffer that the reduce-scatter
// sends: each buffer the size of its Block, taken from a pool that keeps
// released buffers for the next Block of that size (buffer_pool.h); at most
// K + 1 gathered Blocks (SHARD_GRAD_OP: every Block) and K + 1 gradient
// buffers are held at once.
// "Freed" returns the buffer for the next gather (options.poison_freed fills
// it with NaN first, to prove nothing computes on a freed Block). Gradient
// accumulation (no_sync) adds an unsharded gradient accumulator.
// fsdp_memory() predicts these bytes.
#pragma once

#include "kernels/gemm_precision.h"
#include "runtime/comm/communicator.h"
#include "runtime/nn/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/buffer_pool.h"
#include "runtime/parallel/comm_stats.h"
#include "runtime/parallel/fsdp_options.h"
#include "runtime/parallel/shard_layout.h"
#include "runtime/parallel/strategy.h"

#include <deque>
#include <vector>

namespace shardtrain::parallel {

// Collectives of one step over `blocks` Blocks with `micro_batches`
// forward/backward passes: every pass gathers each Block for its forward and,
// FULL_SHARD (and HYBRID within the node), again for its backward except the
// last Block (still gathered); one reduce-scatter per Block and step (no_sync
// accumulates in between); HYBRID adds one cross-node all-reduce per Block.
int64_t collectives_per_step(int64_t blocks, ShardingMode mode, int64_t micro_batches);

// Communication since the last take_fsdp_stats(). payload = the padded Block
// bytes a collective covers (a gather's output, a reduce-scatter's input);
// each rank sends and receives (N-1)/N of it.
struct FsdpStats {
  int64_t allgathers = 0, reduce_scatters = 0, replica_allreduces = 0;
  int64_t allgather_payload_bytes = 0, reduce_scatter_payload_bytes = 0;
  int64_t replica_allreduce_payload_bytes = 0;  // HYBRID: the gradient chunks all-reduced across nodes
  int64_t wire_bytes = 0;  // sent by this rank: (N-1)/N of both payloads, 2(R-1)/R of the replica one
  CommStats comm;          // waits, exposed time, per-collective records (bytes: payload)
};

// Per-rank bytes, f32 (state_floats_per_param: 1 for SGD with momentum, 2 for
// AdamW, 0 for plain SGD).
struct FsdpMemory {
  int64_t param_shard_bytes = 0, grad_shard_bytes = 0, optimizer_shard_bytes = 0;
  int64_t persistent_bytes = 0;  // the three above: what a ZeRO-3 rank keeps between steps
  // The buffer pools at their fullest (buffer_pool.h; replayed in the
  // hooks' order): gathered parameters (FULL_SHARD and HYBRID: the largest
  // set of Blocks in flight at once, at most K+1; SHARD_GRAD_OP every Block)
  // and gradients (at most K+1 Blocks awaiting their reduce-scatter).
  int64_t gather_buffer_bytes = 0;
  int64_t grad_buffer_bytes = 0;
  int64_t low_precision_bytes = 0;   // bf16 copies: the shard and gather buffers (param_dtype), the
                                     // gradient buffers and shard (reduce_dtype)
  int64_t accumulator_bytes = 0;     // with gradient accumulation: the unsharded accumulator
  int64_t ddp_persistent_bytes = 0;  // DDP: full parameters + gradients + optimizer state
  // What this implementation holds in all: the shards, the optimizer state
  // of the shard, the gather and gradient buffers (and the accumulator).
  int64_t implementation_bytes = 0;
};
FsdpMemory fsdp_memory(const nn::FlatParameters& flat, int world, int state_floats_per_param,
                       const FsdpOptions& options, bool accumulation = false);

// The pools' limits over a model of `blocks` Blocks: gathered Blocks held
// at once (the one computing and `prefetch` in flight; SHARD_GRAD_OP keeps
// every Block until its backward) and gradient buffers awaiting their
// reduce-scatter.
int gather_buffer_limit(const FsdpOptions& options, int blocks);
int grad_buffer_limit(const FsdpOptions& options, int blocks);

class FsdpSpec final : public StrategySpec {
 public:
  explicit FsdpSpec(const ParallelOptions& options) : options_(options.fsdp) {}
  std::string name() const override;
  std::string options_section() const override { return "fsdp"; }
  bool uses_groups() const override { return options_.mode == ShardingMode::hybrid; }
  std::vector<ParallelOptions> plan_variants(const ParallelOptions& base, const Topology& t) const override;
  StrategyMemory memory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  WireTheory wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  int64_t collectives_per_step(const nn::FlatParameters& flat, int micro_batches) const override;
  CommLayout comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const override;
  std::unique_ptr<Strategy> start(nn::Model& model, comm::Communicator* comm) const override;

 private:
  int shard_group(const Topology& t) const;  // HYBRID: a node's ranks; else all
  FsdpOptions options_;
};

class Fsdp final : public Strategy {
 public:
  // Takes this rank's shard from the model's current parameters. `comm` is
  // every rank of the job; HYBRID shards over comm.node() and replicates
  // over comm.cross_node() (every node must have as many ranks).
  Fsdp(nn::Model& model, comm::Communicator& comm, const FsdpOptions& options = {});

  // Where this rank is: its index in the shard group (what ShardLayout calls
  // the rank), the group's size, and which replica of the shards it holds
  // (0 unless HYBRID).
  int shard_rank() const { return shard_comm_.rank(); }
  int shard_group_size() const { return shard_comm_.size(); }
  int replica_rank() const { return replica_comm_ ? replica_comm_->rank() : 0; }
  int replicas() const { return replica_comm_ ? replica_comm_->size() : 1; }

  std::string describe(const PlanInputs& in) const override;
  // Rank 0's parameters to every rank (then each rank takes its shard).
  void broadcast_parameters() override;
  // Over this rank's shard (shard_optimizer_ranges of the model's ranges).
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config,
                                                   const std::vector<optim::ParamRange>& full) override;

  // sync = false: the coming backward only accumulates gradients into the
  // model's full gradient buffer (no reduce-scatter); the next synced
  // backward reduce-scatters the sum.
  // The first no_sync allocates an unsharded gradient accumulator (kept).
  void set_sync(bool sync) override;

  void before_forward(int block) override;
  void after_forward(int block) override;
  void before_backward(int block) override;
  void after_backward(int block) override;

  // Each Block's shard is updated as soon as its reduce-scatter is done,
  // last Block first (the order backward produced them); with clipping,
  // after all of them (clip_grad_norm below).
  void update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) override;

  // Blocks until Block b's gradient reduce-scatter (if issued) completed;
  // shard_grads() over layout().block(b)'s chunk is then the global sum.
  void wait_gradients(int block);
  // All Blocks: before the optimizer step (or clipping).
  void wait_gradients();

  // Global-norm clipping of the sharded gradients (waits for all of them):
  // the per-rank squared norms are summed over the group (one f32
  // all-reduce, on the shards' device), then each rank scales its shard as
  // optim::clip_grad_norm would the full gradient.
  void clip_grad_norm(double max_norm);

  // This rank's master parameters and gradients: shard_numel() elements each.
  const Tensor& shard_params() const { return shard_params_; }
  const Tensor& shard_grads() const { return shard_grads_; }
  int64_t shard_numel() const { return layout_.shard_numel(); }
  // The optimizer's ranges over the shard buffers, from the full model's
  // ranges (train::optimizer_ranges(model.flat())).
  std::vector<optim::ParamRange> shard_optimizer_ranges(const std::vector<optim::ParamRange>& full) const {
    return layout_.shard_ranges(full, shard_rank());
  }

  // Evaluation gathers every Block as training does.
  nn::BlockHooks* eval_hooks() override { return this; }
  // The rank's shard; HYBRID: every node holds the same shards, the first
  // one writes them.
  CheckpointView checkpoint_view() override;
  // After shard_params() was overwritten (a checkpoint loaded between
  // steps): no gathered Block is valid any more; the next forward gathers.
  void loaded() override;

  // Collective: the whole flat parameter buffer, gathered into a new host tensor
  // (for comparisons and exports; evaluation runs the model with this
  // object as its hooks instead, gathering Block by Block).
  Tensor full_parameters();

  CommStats take_stats() override { return take_fsdp_stats().comm; }
  FsdpStats take_fsdp_stats();
  const ShardLayout& layout() const { return layout_; }
  const FsdpOptions& options() const { return options_; }

 private:
  enum class State { freed, in_flight, gathered };
  void issue_gather(int block);
  void ensure_gathered(int block);
  void free_block(int block);
  void poison(const Tensor& block_buffer, int block);  // NaN into the Block's parameters
  Tensor block_grads(int block) const;                 // where Block b's layers write gradients now
  void release_full_buffers();
  void reduce_scatter(int block);
  void advance_oldest_reduce();
  void record(comm::Work& w, int group_size);  // group_size: ranks of the collective's communicator
  void load_shards();

  nn::Model& model_;
  comm::Communicator& comm_;          // every rank
  comm::Communicator& shard_comm_;    // the ranks sharing the shards: comm_, or its node group (HYBRID)
  comm::Communicator* replica_comm_;  // HYBRID across nodes (null: no replicas)
  FsdpOptions options_;
  ShardLayout layout_;
  Tensor shard_params_, shard_grads_;
  BufferPool gathers_, grads_;             // gather buffers and gradient buffers (with bf16 twins when mixed)
  int gather_limit_ = 1, grad_limit_ = 1;  // buffers held at once
  std::vector<State> state_;
  std::vector<int> slot_of_block_;       // gather buffer of a Block in flight or gathered
  std::vector<int> grad_slot_of_block_;  // gradient buffer of a Block from its backward to its reduce-scatter
  Tensor accum_;                         // unsharded gradient accumulator (no_sync), once used
  // Mixed precision (bf16): the shard rounded for the all-gather, the
  // reduce-scatter's output (the pools hold the gather outputs and
  // reduce-scatter inputs as twins).
  Tensor shard_params_low_, shard_grads_low_;
  Device device_;  // where the shards and buffers live: the model's device
  bool low_params() const { return options_.param_dtype == DType::bf16; }
  bool low_reduce() const { return options_.reduce_dtype == DType::bf16; }
  std::vector<comm::WorkPtr> gather_work_;
  // A Block's gradient reduction: the reduce-scatter within the shard group
  // (holding a gradient slot), then for HYBRID the all-reduce across nodes.
  struct PendingReduce {
    int block = 0, slot = -1;
    comm::WorkPtr work;     // the reduce-scatter; null once completed
    comm::WorkPtr replica;  // HYBRID: the all-reduce across nodes, issued when `work` completed
  };
  std::deque<PendingReduce> reduces_;  // issue order = completion order
  bool sync_ = true;
  FsdpStats stats_;
  Bf16Gemms bf16_gemms_;  // param_dtype bf16: around every Block's compute
};

}  // namespace shardtrain::parallel
