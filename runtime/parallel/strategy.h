// How the ranks share a training step: one interface for every strategy
// (none, ddp, zero1, fsdp with its sharding modes), made by one factory
// (strategy_factory.cpp). The trainer, `plan`, checkpointing and telemetry
// see only this interface; a new strategy is a new file pair and one line in
// the factory.
//
// A strategy has two faces:
//   StrategySpec  what it is before any rank runs it: its name, the bytes a
//                 rank holds (for `plan`), the bytes it must send per step
//                 (for the end-of-run check), the collectives of a step.
//                 Pure: no communicator, no model buffers.
//   Strategy      the running instance over one model and communicator: the
//                 Block hooks (nn::BlockHooks), no_sync for accumulation,
//                 the wait-and-update after backward, the step's
//                 communication statistics, its part of a checkpoint, its
//                 evaluation hooks and the [init] line that describes it.
// A strategy owns its compute precision (FSDP's bf16 parameters make the
// GEMMs of the Blocks it gathers bf16, on the CPU and the GPU alike): the
// trainer sets nothing process-wide for it.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/nn/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/comm_stats.h"
#include "runtime/parallel/ddp_options.h"
#include "runtime/parallel/fsdp_options.h"
#include "runtime/parallel/pieces.h"

#include <memory>
#include <string>
#include <vector>

namespace shardtrain::parallel {

// The [parallel] section of a config: which strategy and the options of each.
struct ParallelOptions {
  std::string strategy = "none";  // a name of strategy_names()
  DdpOptions ddp;                 // ddp, and zero1's gradient buckets
  FsdpOptions fsdp;
  // Activation checkpointing of every checkpoint_every-th Block that can
  // recompute (nn/recompute.h); independent of the strategy.
  nn::Recompute activation_checkpointing = nn::Recompute::none;
  int64_t checkpoint_every = 1;
};

// Where a job runs, as a plan sees it.
struct Topology {
  int ranks = 1;
  // Ranks that share a node (HYBRID's shard group); at most `ranks`.
  int ranks_per_node = 1;
};

struct MemoryComponent {
  std::string name;  // "parameters", "gradient shard", ...
  int64_t bytes = 0;
};

// What a strategy keeps per rank: parameters, gradients, optimizer state
// (or their shards) and the buffers it adds (gathers, wire copies, staging).
struct StrategyMemory {
  std::vector<MemoryComponent> components;
  int64_t persistent_bytes = 0;  // parameters + gradients + optimizer state, kept between steps
};

// Bytes per step and rank a bandwidth-optimal (ring) implementation sends,
// and the formula that gives them (for the log line).
struct WireTheory {
  double bytes = 0;
  std::string formula;
};

// The collectives of one step, as `shardtrain study predict` replays them
// against per-Block compute times (tools/study/study_schedule.py follows the
// hooks of ddp.cpp, zero1.cpp and fsdp.cpp with these sizes). Bytes are
// nccl-tests' (an all-reduce's buffer, a reduce-scatter's input, an
// all-gather's output); per Block in forward numbering.
struct DdpBucketLayout {
  int first_block = 0, last_block = 0;  // issued after first_block's backward
  int64_t bytes = 0;                    // all-reduced, or reduce-scattered (zero1: padded)
  int64_t gather_bytes = 0;             // zero1: all-gathered after the update (padded)
};
struct CommLayout {
  std::vector<DdpBucketLayout> buckets;      // ddp, zero1: over every rank
  bool buckets_scatter = false;              // zero1: buckets reduce-scattered, then all-gathered
  int shard_group = 0;                       // fsdp: ranks a Block is sharded over (0: no FSDP)
  int replica_group = 0;                     // fsdp hybrid: ranks holding the same shard (one per node)
  std::vector<int64_t> gather_bytes;         // fsdp: each Block's all-gather
  std::vector<int64_t> reduce_bytes;         // fsdp: each Block's reduce-scatter
  std::vector<int64_t> replica_bytes;        // fsdp hybrid: each Block's cross-node all-reduce
  int prefetch = 0;                          // fsdp: gathers in flight ahead
  int gather_buffers = 0, grad_buffers = 0;  // fsdp: gathered Blocks and gradient buffers held at most
  bool regather_in_backward = false;         // fsdp full and hybrid: every Block but the last gathered again
};

// What `plan` and the volume check ask of every strategy.
struct PlanInputs {
  Topology topology;
  int state_floats_per_param = 0;  // optim::state_floats_per_param
  int micro_batches = 1;           // train.accumulation_steps
  comm::CommOptions comm;          // staging sizes of the collectives
};

class Strategy;

class StrategySpec {
 public:
  virtual ~StrategySpec() = default;
  // "none", "ddp", "zero1", "fsdp full", "fsdp grad_op", "fsdp hybrid".
  virtual std::string name() const = 0;
  // An Error when this strategy cannot run on `t` ("none" on several ranks).
  virtual void check(const Topology& t) const;
  // Whether it needs a communicator over the job's ranks.
  virtual bool communicates() const { return true; }
  // Whether it runs collectives on the world's node(), cross_node() or
  // groups() while the world runs its own (comm::CommOptions::world_beside_groups).
  virtual bool uses_groups() const { return false; }
  // The [parallel.X] section whose options it reads ("ddp" for ddp and
  // zero1), empty for none: keys under any other section are an error.
  virtual std::string options_section() const { return ""; }
  // The options of each variant `plan` compares for this strategy at `t`
  // (FSDP: each sharding mode that applies), none when it does not apply.
  virtual std::vector<ParallelOptions> plan_variants(const ParallelOptions& base, const Topology& t) const;
  virtual StrategyMemory memory(const nn::FlatParameters& flat, const PlanInputs& in) const = 0;
  virtual WireTheory wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const = 0;
  // Collectives one step issues (for spreading debug.slow_comm_ms).
  virtual int64_t collectives_per_step(const nn::FlatParameters& flat, int micro_batches) const = 0;
  // Its step's collectives and sizes (none: empty).
  virtual CommLayout comm_layout(const nn::FlatParameters&, const PlanInputs&) const { return {}; }
  // The running strategy; `comm` spans every rank (null for "none").
  virtual std::unique_ptr<Strategy> start(nn::Model& model, comm::Communicator* comm) const = 0;
};

// One rank's part of a checkpoint: the parameter buffer it holds (the whole
// flat buffer, or its shard) and which of its elements it writes and reads,
// in the model's flat coordinates. Optimizer state has the same layout.
struct CheckpointView {
  Tensor params;
  Pieces write, read;
};

class Strategy : public nn::BlockHooks {
 public:
  // The [init] line after "[init] ": buckets, shards, dtypes, bytes.
  virtual std::string describe(const PlanInputs& in) const = 0;
  // Collective: checks that every rank built the same model, then gives
  // every rank rank 0's parameters (each takes its shard where sharded).
  virtual void broadcast_parameters() = 0;
  // The optimizer over what this rank updates (the whole flat buffer, or its
  // shard), from the model's ranges (train::optimizer_ranges).
  virtual std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config,
                                                           const std::vector<optim::ParamRange>& full) = 0;
  // sync = false: the coming backward only accumulates gradients (no_sync).
  virtual void set_sync(bool sync) = 0;
  // After the last backward of a step: waits for the gradients, clips them
  // to clip_grad_norm (> 0), updates the parameters with `optimizer` (made
  // by make_optimizer) and brings them back where they are needed. Adds the
  // optimizer's own time to optimizer_s.
  virtual void update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) = 0;
  // Whether its hooks issue no device work of their own in a micro-batch
  // whose backward has this set_sync() (no collectives, no gathers), so that
  // its forward and backward can be captured into a CUDA graph and replayed
  // (runtime.cuda_graphs): DDP's no_sync micro-batches only count gradients.
  virtual bool hooks_capturable(bool /*sync*/) const { return false; }
  // Whether update() is device work alone on this rank's own buffers (no
  // collectives, no host waits: "none"), so that it can join the last
  // micro-batch's CUDA graph. The trainer then calls optimizer.prepare(lr)
  // before the graph, device_update() inside it and
  // optimizer.finish_step() after: update() split so that a replay, which
  // runs no host code, loses nothing.
  virtual bool update_capturable() const { return false; }
  virtual void device_update(optim::Optimizer& optimizer, float lr, double clip_grad_norm);
  // Communication since the last call.
  virtual CommStats take_stats() = 0;
  // Hooks evaluation runs the model with (FSDP gathers every Block), or
  // null; after an evaluation, end_evaluation() drops its statistics (they
  // are the evaluation's, not the next step's).
  virtual nn::BlockHooks* eval_hooks() { return nullptr; }
  void end_evaluation() { take_stats(); }
  // What a checkpoint saves and loads of this rank; after a load into
  // view().params, loaded() rebuilds what derives from it.
  virtual CheckpointView checkpoint_view() = 0;
  virtual void loaded() {}
};

// The names strategy_factory knows, in the order `plan` shows them.
std::vector<std::string> strategy_names();
// The spec of options.strategy; an Error naming the valid names otherwise.
std::unique_ptr<StrategySpec> make_strategy_spec(const ParallelOptions& options);

}  // namespace shardtrain::parallel
