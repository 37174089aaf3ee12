// FsdpSpec: FSDP before it runs (strategy.h): its memory (fsdp_memory and
// the reduce-scatter's staging), its communication volume and collectives.
#include "runtime/parallel/fsdp.h"

#include "runtime/core/dtype_names.h"

#include <algorithm>

namespace shardtrain::parallel {
namespace {

constexpr int64_t kF32 = 4;

}  // namespace

void validate(const FsdpOptions& o) {
  ST_CHECK(o.prefetch >= 0, "parallel.fsdp.prefetch must not be negative, got {}", o.prefetch);
  ST_CHECK(o.shard_group_size >= 0, "parallel.fsdp.shard_group_size must not be negative, got {}", o.shard_group_size);
  ST_CHECK(o.shard_group_size == 0 || o.mode == ShardingMode::hybrid,
           "parallel.fsdp.shard_group_size = {} applies to parallel.fsdp.sharding = \"hybrid\" only, not \"{}\"",
           o.shard_group_size, name_of(o.mode));
  for (const auto& [key, dtype] : {std::pair{"param_dtype", o.param_dtype}, std::pair{"reduce_dtype", o.reduce_dtype}})
    ST_CHECK(dtype == DType::f32 || dtype == DType::bf16, "parallel.fsdp.{} {} is not one of {}", key, name_of(dtype),
             enum_choices<DType>());
}

void check_shard_groups(const FsdpOptions& o, int ranks) {
  const int k = o.shard_group_size;
  ST_CHECK(k == 0 || (k <= ranks && ranks % k == 0),
           "parallel.fsdp.shard_group_size = {}: groups of {} ranks do not split the job's {} ranks", k, k, ranks);
}

std::string FsdpSpec::name() const { return fmt::format("fsdp {}", name_of(options_.mode)); }

int FsdpSpec::shard_group(const Topology& t) const {
  if (options_.mode != ShardingMode::hybrid) return t.ranks;
  check_shard_groups(options_, t.ranks);
  return options_.shard_group_size > 0 ? options_.shard_group_size : std::min(t.ranks_per_node, t.ranks);
}

std::vector<ParallelOptions> FsdpSpec::plan_variants(const ParallelOptions& base, const Topology& t) const {
  std::vector<ParallelOptions> out;
  for (const EnumName<ShardingMode>& m : enum_names(ShardingMode{})) {
    // HYBRID only where its groups (the nodes, or shard_group_size) split
    // the ranks into several equal groups; a size asked for that cannot is
    // an error, not a column left out.
    if (m.value == ShardingMode::hybrid) check_shard_groups(base.fsdp, t.ranks);
    const int k = base.fsdp.shard_group_size > 0 ? base.fsdp.shard_group_size : t.ranks_per_node;
    if (m.value == ShardingMode::hybrid && (k >= t.ranks || k < 1 || t.ranks % k != 0)) continue;
    ParallelOptions o = base;
    o.strategy = "fsdp";
    o.fsdp.mode = m.value;
    if (m.value != ShardingMode::hybrid) o.fsdp.shard_group_size = 0;
    out.push_back(o);
  }
  return out;
}

StrategyMemory FsdpSpec::memory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const int group = shard_group(in.topology);
  const FsdpMemory m = fsdp_memory(flat, group, in.state_floats_per_param, options_, in.micro_batches > 1);
  StrategyMemory out;
  out.components = {{"parameter shard", m.param_shard_bytes},
                    {"gradient shard", m.grad_shard_bytes},
                    {"optimizer state shard", m.optimizer_shard_bytes},
                    {"gathered Blocks", m.gather_buffer_bytes},
                    {"gradient buffers", m.grad_buffer_bytes},
                    {"gradient accumulator", m.accumulator_bytes},
                    {"bf16 copies (mixed precision)", m.low_precision_bytes}};
  out.persistent_bytes = m.persistent_bytes;
  // The reduce-scatter's staging in the communicator
  // (runtime/comm/algorithms/reduce_scatter_ring.cpp), sized by the largest Block: a ring above
  // comm.reduce_scatter_small_bytes keeps two chunks in flight and, with
  // more than 2 ranks, two out-of-place partial sums of a segment. A group
  // on one node reduce-scatters in its shared window instead, which stages
  // nothing (runtime/comm/algorithms/reduce_scatter_shm.h).
  const ShardLayout layout(flat.blocks(), group);
  const int64_t padded = layout.max_padded_numel() * int64_t(dtype_size(options_.reduce_dtype));
  const int per_node = std::max(1, in.topology.ranks_per_node);
  const bool group_on_a_node = group <= per_node && per_node % group == 0;
  const comm::AllreduceAlgorithm forced = in.comm.allreduce_algorithm;
  const bool shared_memory = in.comm.shared_memory && group_on_a_node &&
                             (forced == comm::AllreduceAlgorithm::automatic || forced == comm::AllreduceAlgorithm::shm);
  if (group > 1 && padded > in.comm.reduce_scatter_small_bytes && !shared_memory) {
    const int64_t segment = padded / group;
    out.components.push_back(
        {"communication staging", 2 * std::min(segment, in.comm.chunk_bytes) + (group > 2 ? 2 * segment : 0)});
  }
  return out;
}

// FULL_SHARD gathers in forward and backward and reduce-scatters: (2g + r)
// (N-1)/N Ψ, with g counted once per micro-batch (each pass gathers);
// SHARD_GRAD_OP gathers once: (g + r)(N-1)/N Ψ; HYBRID with n ranks per node
// and R nodes: FULL_SHARD within the node plus 2(R-1)/R of the f32 shard
// across nodes.
WireTheory FsdpSpec::wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const int world = in.topology.ranks, k = in.micro_batches;
  if (world <= 1) return {};
  const double psi = double(flat.parameter_count()), n = world;
  const int gb = int(dtype_size(options_.param_dtype)), rb = int(dtype_size(options_.reduce_dtype));
  const double g = double(gb) * k, r = rb;
  const std::string gs = k > 1 ? fmt::format("{} x {}", k, gb) : fmt::format("{}", gb);
  switch (options_.mode) {
    case ShardingMode::hybrid: {
      const int s = shard_group(in.topology);
      const double nodes = double(world) / s;
      return {(2 * g + r) * (s - 1) / s * psi + 2 * (nodes - 1) / nodes * kF32 * psi / s,
              fmt::format("({}+{}+{})(n-1)/n + 2(R-1)/(R n) x 4 B with n = {}, R = {},", gs, gs, rb, s,
                          world / std::max(1, s))};
    }
    case ShardingMode::full_shard:
      return {(2 * g + r) * (n - 1) / n * psi, fmt::format("({}+{}+{})(N-1)/N B", gs, gs, rb)};
    case ShardingMode::shard_grad_op: return {(g + r) * (n - 1) / n * psi, fmt::format("({}+{})(N-1)/N B", gs, rb)};
  }
  return {};
}

int gather_buffer_limit(const FsdpOptions& o, int blocks) {
  return o.mode == ShardingMode::shard_grad_op ? blocks : std::min(o.prefetch + 1, blocks);
}

int grad_buffer_limit(const FsdpOptions& o, int blocks) { return std::min(o.prefetch + 1, blocks); }

CommLayout FsdpSpec::comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const {
  CommLayout c;
  c.shard_group = shard_group(in.topology);
  if (in.topology.ranks <= 1) return c;
  const ShardLayout layout(flat.blocks(), c.shard_group);
  const int n = int(flat.blocks().size());
  const int64_t gb = int64_t(dtype_size(options_.param_dtype)), rb = int64_t(dtype_size(options_.reduce_dtype));
  const bool hybrid = options_.mode == ShardingMode::hybrid && in.topology.ranks > c.shard_group;
  c.replica_group = hybrid ? in.topology.ranks / c.shard_group : 0;
  for (int b = 0; b < n; ++b) {
    c.gather_bytes.push_back(layout.padded_numel(b) * gb);
    c.reduce_bytes.push_back(layout.padded_numel(b) * rb);
    if (hybrid) c.replica_bytes.push_back(layout.block(b).chunk * kF32);
  }
  c.prefetch = options_.prefetch;
  c.gather_buffers = gather_buffer_limit(options_, n);
  c.grad_buffers = grad_buffer_limit(options_, n);
  c.regather_in_backward = options_.mode != ShardingMode::shard_grad_op;
  return c;
}

int64_t FsdpSpec::collectives_per_step(const nn::FlatParameters& flat, int micro_batches) const {
  return parallel::collectives_per_step(int64_t(flat.blocks().size()), options_.mode, micro_batches);
}

std::unique_ptr<Strategy> FsdpSpec::start(nn::Model& model, comm::Communicator* comm) const {
  ST_CHECK(comm != nullptr, "fsdp needs a communicator");
  return std::make_unique<Fsdp>(model, *comm, options_);
}

}  // namespace shardtrain::parallel
