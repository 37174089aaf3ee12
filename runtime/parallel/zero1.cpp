#include "runtime/parallel/zero1.h"

#include "kernels/ops.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/dtype_names.h"
#include "runtime/core/error.h"
#include "runtime/parallel/optimizer_span.h"
#include "runtime/telemetry/recorder.h"

#include <algorithm>

namespace shardtrain::parallel {
namespace {

constexpr int64_t kF32Bytes = 4;

}  // namespace

ShardLayout Zero1::layout(const nn::FlatParameters& flat, const DdpOptions& options, int ranks) {
  // In flat order (the buckets run from the end of the buffer to its
  // start): a shard's pieces then increase in flat and in local offsets,
  // which a checkpoint's selections need.
  const std::vector<Bucket> buckets = Ddp::plan_buckets(flat, options);
  std::vector<nn::BlockRange> ranges;
  for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) ranges.push_back({b->offset, b->numel});
  return ShardLayout(ranges, ranks);
}

int64_t Zero1::room(const ShardLayout& layout, int64_t flat_numel) {
  int64_t end = flat_numel;
  for (int b = 0; b < int(layout.blocks().size()); ++b)
    end = std::max(end, layout.block(b).flat_offset + layout.padded_numel(b));
  return end - flat_numel;
}

StrategyMemory Zero1Spec::memory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const ShardLayout l = Zero1::layout(flat, options_, in.topology.ranks);
  const int64_t full = (flat.numel() + Zero1::room(l, flat.numel())) * kF32Bytes, shard = l.shard_numel() * kF32Bytes;
  StrategyMemory m;
  m.components = {{"parameters", full},
                  {"gradients", full},
                  {"parameter shard", shard},
                  {"gradient shard", shard},
                  {"optimizer state shard", shard * in.state_floats_per_param}};
  for (const MemoryComponent& c : m.components) m.persistent_bytes += c.bytes;
  if (options_.grad_dtype == DType::bf16) {
    int64_t padded = 0;
    for (int b = 0; b < int(l.blocks().size()); ++b) padded += l.padded_numel(b);
    m.components.push_back({"bf16 gradient buckets", padded * 2});
  }
  return m;
}

WireTheory Zero1Spec::wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const double n = in.topology.ranks, psi = double(flat.parameter_count());
  const double r = double(dtype_size(options_.grad_dtype));
  if (n <= 1) return {};
  return {(r + kF32Bytes) * (n - 1) / n * psi, fmt::format("({} + 4)(N-1)/N B", r)};
}

int64_t Zero1Spec::collectives_per_step(const nn::FlatParameters& flat, int) const {
  return 2 * int64_t(Ddp::plan_buckets(flat, options_).size());  // a reduce-scatter and an all-gather each
}

CommLayout Zero1Spec::comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const {
  CommLayout c;
  const int n = in.topology.ranks;
  if (n <= 1) return c;
  const ShardLayout l = Zero1::layout(flat, options_, n);
  c.buckets = bucket_layout(flat, options_);
  c.buckets_scatter = true;
  for (size_t b = 0; b < c.buckets.size(); ++b) {
    const int k = Zero1::slot(b, c.buckets.size());
    c.buckets[b].bytes = l.padded_numel(k) * int64_t(dtype_size(options_.grad_dtype));
    c.buckets[b].gather_bytes = l.padded_numel(k) * kF32Bytes;
  }
  return c;
}

std::unique_ptr<Strategy> Zero1Spec::start(nn::Model& model, comm::Communicator* comm) const {
  ST_CHECK(comm != nullptr, "zero1 needs a communicator");
  return std::make_unique<Zero1>(model, *comm, options_);
}

Zero1::Zero1(nn::Model& model, comm::Communicator& comm, const DdpOptions& options)
    : model_(model), comm_(comm), ddp_(model, comm, options), layout_(layout(model.flat(), options, comm.size())) {
  const int64_t numel = model.flat().numel(), extra = room(layout_, numel);
  const Device dev = model.device();
  params_ = Tensor::zeros({numel + extra}, DType::f32, dev);
  grads_ = Tensor::zeros({numel + extra}, DType::f32, dev);
  copy_tensor(params_.view(0, {numel}), model.flat().params());
  model.replace_buffers(params_.view(0, {numel}), grads_.view(0, {numel}));
  shard_params_ = Tensor::zeros({std::max<int64_t>(1, layout_.shard_numel())}, DType::f32, dev);
  shard_grads_ = Tensor::zeros(shard_params_.shape(), DType::f32, dev);
  ddp_.scatter_into(layout_, grads_, shard_grads_);
  take_shard();
}

std::string Zero1::describe(const PlanInputs& in) const {
  const double mib = double(1 << 20);
  const int64_t owned = total_numel(fsdp_shard(layout_, comm_.rank()));
  return fmt::format(
      "zero1: gradients reduce-scattered in {} bucket(s) as {}; optimizer state sharded: this rank updates {} "
      "of {} elements (1/{} of each bucket) and keeps {:.2f} MiB of state (DDP: {:.2f} MiB); each bucket's "
      "updated chunks all-gathered after the step",
      ddp_.buckets().size(), name_of(ddp_.options().grad_dtype), owned, model_.flat().numel(), comm_.size(),
      double(layout_.shard_numel() * kF32Bytes * in.state_floats_per_param) / mib,
      double(model_.flat().numel() * kF32Bytes * in.state_floats_per_param) / mib);
}

void Zero1::broadcast_parameters() {
  ddp_.broadcast_parameters();
  take_shard();
}

void Zero1::take_shard() {
  for (const Piece& p : fsdp_shard(layout_, comm_.rank()))
    copy_tensor(shard_params_.view(p.local_offset, {p.numel()}),
                model_.flat().params().view(p.flat_begin, {p.numel()}));
}

std::unique_ptr<optim::Optimizer> Zero1::make_optimizer(const optim::OptimizerConfig& config,
                                                        const std::vector<optim::ParamRange>& full) {
  return optim::make_optimizer(config, shard_params_.numel(), layout_.shard_ranges(full, comm_.rank()),
                               model_.device());
}

void Zero1::clip_grad_norm(double max_norm) {
  // The squared norm of every gradient: the shards' (padding holds zeros),
  // summed over the ranks, on the shards' device.
  Tensor sq = Tensor::empty({1}, DType::f32, model_.device());
  ops::sum_squares(sq, shard_grads_);
  comm_.allreduce(sq, comm::ReduceOp::sum)->wait();
  ops::clip_to_squared_norm(shard_grads_, sq, max_norm);
}

void Zero1::update(optim::Optimizer& optimizer, float lr, double max_norm, double& optimizer_s) {
  if (max_norm > 0) {
    ddp_.wait_gradients();
    timed_optimizer(optimizer_s, -1, [&] {
      clip_grad_norm(max_norm);
      optimizer.step(shard_params_, shard_grads_, lr);
    });
  } else {
    // This rank's chunk of each bucket as soon as the bucket is reduced.
    for (size_t i = 0; i < ddp_.buckets().size(); ++i) {
      ddp_.wait_bucket(i);
      const BlockShard& s = layout_.block(slot(i, ddp_.buckets().size()));
      timed_optimizer(optimizer_s, int64_t(i), [&] {
        optimizer.update(shard_params_, shard_grads_, lr, s.local_offset, s.local_offset + s.chunk);
      });
    }
    optimizer.finish_step();
  }
  gather_parameters();
}

void Zero1::gather_parameters() {
  const int n = comm_.size();
  std::vector<comm::WorkPtr> works;
  // From the start of the flat buffer to its end: each gather's padding
  // lands on the next one's range, which then overwrites it.
  for (int k = 0; k < int(layout_.blocks().size()); ++k) {
    const BlockShard& s = layout_.block(k);
    works.push_back(
        comm_.allgather(shard_params_.view(s.local_offset, {s.chunk}), params_.view(s.flat_offset, {s.chunk * n})));
    stats_.wire_bytes += (n - 1) * s.chunk * kF32Bytes;
  }
  telemetry::Span span("wait allgather", "comm");
  for (const comm::WorkPtr& w : works) {
    w->wait();
    stats_.add_completed(*w, n);
  }
}

CommStats Zero1::take_stats() {
  CommStats s = ddp_.take_stats();
  s.add(stats_);
  stats_ = {};
  return s;
}

CheckpointView Zero1::checkpoint_view() {
  const Pieces mine = fsdp_shard(layout_, comm_.rank());
  return {shard_params_, mine, mine};
}

void Zero1::loaded() {
  gather_parameters();
  stats_ = {};  // the load's, not a step's
}

}  // namespace shardtrain::parallel
