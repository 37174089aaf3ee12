#include "runtime/parallel/fsdp.h"

#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/dtype_names.h"
#include "runtime/parallel/optimizer_span.h"
#include "runtime/telemetry/recorder.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace shardtrain::parallel {

namespace {
// HYBRID's groups: the nodes unless shard_group_size names other groups of
// consecutive ranks (which the node's and cross-node communicators are where
// the size is the node's).
comm::Communicator& shard_group(comm::Communicator& comm, const FsdpOptions& o) {
  validate(o);
  if (o.mode != ShardingMode::hybrid) return comm;
  check_shard_groups(o, comm.size());
  return o.shard_group_size > 0 ? comm.groups(o.shard_group_size, comm::GroupSide::within) : comm.node();
}
comm::Communicator* replica_group(comm::Communicator& comm, const FsdpOptions& o) {
  if (o.mode != ShardingMode::hybrid) return nullptr;
  comm::Communicator& across =
      o.shard_group_size > 0 ? comm.groups(o.shard_group_size, comm::GroupSide::across) : comm.cross_node();
  return across.size() > 1 ? &across : nullptr;
}
}  // namespace

Fsdp::Fsdp(nn::Model& model, comm::Communicator& comm, const FsdpOptions& options)
    : model_(model),
      comm_(comm),
      shard_comm_(shard_group(comm, options)),
      replica_comm_(replica_group(comm, options)),
      options_(options),
      layout_(model.flat().blocks(), shard_comm_.size()) {
  // HYBRID: shard s of replica r must be the same shard on every node.
  ST_CHECK(shard_comm_.size() * replicas() == comm.size(),
           "FSDP HYBRID needs the same number of ranks on every node: the job's {} ranks do not make nodes of {} "
           "(this rank's node) (set comm.ranks_per_node, or place the ranks evenly)",
           comm.size(), shard_comm_.size());
  const int n = model.num_blocks();
  // Everything lives where the model does (its flat buffers' device).
  const Device dev = device_ = model.device();
  ST_CHECK(!options.poison_freed || dev.is_cpu(), "FSDP: poison_freed is a CPU debugging aid");
  shard_params_ = Tensor::zeros({std::max<int64_t>(1, layout_.shard_numel())}, DType::f32, dev);
  shard_grads_ = Tensor::zeros({std::max<int64_t>(1, layout_.shard_numel())}, DType::f32, dev);
  // Gather buffers: SHARD_GRAD_OP keeps every Block from forward to backward;
  // the others hold the Block being computed and `prefetch` in flight.
  // Gradient buffers: a Block's from its backward until its reduce-scatter
  // completed, `prefetch` + 1 at most. Each buffer is its Block's padded size
  // (buffer_pool.h), made at first use.
  gather_limit_ = gather_buffer_limit(options, n);
  grad_limit_ = grad_buffer_limit(options, n);
  gathers_ = BufferPool(dev, low_params());
  grads_ = BufferPool(dev, low_reduce());
  if (low_params()) shard_params_low_ = Tensor::zeros(shard_params_.shape(), DType::bf16, dev);
  if (low_reduce()) shard_grads_low_ = Tensor::zeros(shard_grads_.shape(), DType::bf16, dev);
  state_.assign(size_t(n), State::freed);
  slot_of_block_.assign(size_t(n), -1);
  grad_slot_of_block_.assign(size_t(n), -1);
  gather_work_.resize(size_t(n));
  load_shards();
}

void Fsdp::load_shards() {
  const Tensor& flat = model_.flat().params();
  shard_params_.fill_zero();
  for (int b = 0; b < model_.num_blocks(); ++b) {
    const ShardLayout::Owned o = layout_.owned(b, shard_rank());
    if (o.end > o.begin)
      copy_tensor(shard_params_.view(layout_.block(b).local_offset, {o.end - o.begin}),
                  flat.view(o.begin, {o.end - o.begin}));
  }
}

void Fsdp::broadcast_parameters() {
  ST_CHECK(model_.flat().has_buffers(), "FSDP: broadcast_parameters after the full buffers were released");
  comm_.broadcast(model_.flat().params(), 0)->wait();
  load_shards();
  model_.release_flat_buffers();  // from here on this rank holds its shards
}

void Fsdp::set_sync(bool sync) {
  // no_sync micro-batches accumulate the full gradient (as PyTorch's FSDP
  // no_sync does): an unsharded accumulator, allocated the first time.
  if (!sync && !accum_.defined()) accum_ = Tensor::zeros({model_.flat().numel()}, DType::f32, device_);
  sync_ = sync;
}

Tensor Fsdp::block_grads(int b) const {
  const BlockShard& s = layout_.block(b);
  if (accum_.defined()) return accum_.view(s.flat_offset, {s.numel});
  if (grad_slot_of_block_[size_t(b)] >= 0) return grads_.f32(grad_slot_of_block_[size_t(b)], layout_.padded_numel(b));
  // Not in backward: nothing writes gradients; bind the gathered copy.
  return gathers_.f32(slot_of_block_[size_t(b)], layout_.padded_numel(b));
}

void Fsdp::issue_gather(int b) {
  ST_ASSERT(state_[size_t(b)] == State::freed && gathers_.held() < gather_limit_);
  const int slot = gathers_.acquire(layout_.padded_numel(b));
  const BlockShard& s = layout_.block(b);
  const int64_t padded = layout_.padded_numel(b);
  if (low_params()) {
    // The master shard rounded to bf16 now (the optimizer may have stepped).
    const Tensor low = shard_params_low_.view(s.local_offset, {s.chunk});
    ops::convert(low, shard_params_.view(s.local_offset, {s.chunk}));
    gather_work_[size_t(b)] = shard_comm_.allgather(low, gathers_.bf16(slot, padded));
  } else {
    gather_work_[size_t(b)] =
        shard_comm_.allgather(shard_params_.view(s.local_offset, {s.chunk}), gathers_.f32(slot, padded));
  }
  slot_of_block_[size_t(b)] = slot;
  state_[size_t(b)] = State::in_flight;
  const int64_t elem = low_params() ? 2 : 4, wire = padded / shard_comm_.size() * (shard_comm_.size() - 1) * elem;
  ++stats_.allgathers;
  stats_.allgather_payload_bytes += padded * elem;
  stats_.wire_bytes += wire;
  stats_.comm.wire_bytes += wire;
}

void Fsdp::ensure_gathered(int b) {
  if (state_[size_t(b)] == State::gathered) return;
  if (state_[size_t(b)] == State::freed) issue_gather(b);
  comm::Work& w = *gather_work_[size_t(b)];
  {
    telemetry::Span span("wait gather", "comm", b);
    w.wait();
  }
  record(w, shard_comm_.size());
  gather_work_[size_t(b)].reset();
  state_[size_t(b)] = State::gathered;
  if (low_params()) {
    const int slot = slot_of_block_[size_t(b)];
    const int64_t padded = layout_.padded_numel(b);
    ops::convert(gathers_.f32(slot, padded), gathers_.bf16(slot, padded));
  }
  // The Block computes on the gathered copy itself: no copy into a full buffer.
  model_.bind_block(b, gathers_.f32(slot_of_block_[size_t(b)], layout_.padded_numel(b)), block_grads(b));
}

void Fsdp::free_block(int b) {
  ST_ASSERT(state_[size_t(b)] == State::gathered);
  state_[size_t(b)] = State::freed;
  const int slot = std::exchange(slot_of_block_[size_t(b)], -1);
  // The Block stays bound to the buffer, which the next gather reuses:
  // poisoning it proves nothing computes on a freed Block.
  if (options_.poison_freed) poison(gathers_.f32(slot, layout_.block(b).numel), b);
  gathers_.release(slot);
}

void Fsdp::release_full_buffers() {
  if (model_.flat().has_buffers()) model_.release_flat_buffers();
}

void Fsdp::poison(const Tensor& block_buffer, int b) {
  // Parameters only: alignment padding between them stays zero, as
  // everything that sums over the buffers (norms) expects.
  const int64_t base = model_.flat().blocks()[size_t(b)].offset;
  for (const nn::ParamEntry& e : model_.flat().entries())
    if (e.block == b)
      std::fill_n(block_buffer.f32() + (e.offset - base), e.spec.shape.numel(),
                  std::numeric_limits<float>::quiet_NaN());
}

void Fsdp::before_forward(int b) {
  const int n = model_.num_blocks();
  if (b == 0) {
    release_full_buffers();  // a model used without broadcast_parameters()
    // A new forward: parameters may have changed (optimizer step) since any
    // Block was last gathered.
    for (int i = 0; i < n; ++i) {
      ST_ASSERT(state_[size_t(i)] != State::in_flight);
      if (state_[size_t(i)] == State::gathered) free_block(i);
    }
  }
  if (low_params()) bf16_gemms_.enter();
  if (state_[size_t(b)] == State::freed) issue_gather(b);
  for (int j = b + 1; j <= std::min(n - 1, b + options_.prefetch) && gathers_.held() < gather_limit_; ++j)
    if (state_[size_t(j)] == State::freed) issue_gather(j);
  ensure_gathered(b);
}

void Fsdp::after_forward(int b) {
  bf16_gemms_.leave();
  // The last Block's backward follows at once: keep it.
  if (options_.mode != ShardingMode::shard_grad_op && b != model_.num_blocks() - 1) free_block(b);
}

void Fsdp::before_backward(int b) {
  if (low_params()) bf16_gemms_.enter();
  if (state_[size_t(b)] == State::freed) issue_gather(b);
  for (int j = b - 1; j >= std::max(0, b - options_.prefetch) && gathers_.held() < gather_limit_; --j)
    if (state_[size_t(j)] == State::freed) issue_gather(j);
  ensure_gathered(b);
  if (!accum_.defined()) {
    // The backward writes the Block's gradients straight into a gradient
    // buffer, which its reduce-scatter then sends; the tail past its last
    // parameter (alignment and shard padding) must be zero.
    while (grads_.held() >= grad_limit_) advance_oldest_reduce();
    const int64_t padded = layout_.padded_numel(b);
    const int slot = grads_.acquire(padded);
    grad_slot_of_block_[size_t(b)] = slot;
    const int64_t extent = model_.flat().block_param_extent(b);
    if (padded > extent) grads_.f32(slot, padded).view(extent, {padded - extent}).fill_zero();
  }
  model_.bind_block(b, gathers_.f32(slot_of_block_[size_t(b)], layout_.padded_numel(b)), block_grads(b));
}

void Fsdp::after_backward(int b) {
  bf16_gemms_.leave();
  if (sync_) reduce_scatter(b);
  free_block(b);
}

void Fsdp::reduce_scatter(int b) {
  const BlockShard& s = layout_.block(b);
  const int64_t padded = layout_.padded_numel(b);
  int slot = std::exchange(grad_slot_of_block_[size_t(b)], -1);
  if (slot < 0) {
    // Accumulated over micro-batches in the unsharded accumulator.
    while (grads_.held() >= grad_limit_) advance_oldest_reduce();
    slot = grads_.acquire(padded);
    const Tensor in = grads_.f32(slot, padded);
    copy_tensor(in.view(0, {s.numel}), accum_.view(s.flat_offset, {s.numel}));
    if (padded > s.numel) in.view(s.numel, {padded - s.numel}).fill_zero();
    if (options_.poison_freed) poison(accum_.view(s.flat_offset, {s.numel}), b);
  }
  const Tensor in = grads_.f32(slot, padded);
  PendingReduce p;
  p.block = b;
  p.slot = slot;
  if (low_reduce()) {
    const Tensor low = grads_.bf16(slot, padded);
    ops::convert(low, in.view(0, {padded}));
    p.work = shard_comm_.reduce_scatter(low, shard_grads_low_.view(s.local_offset, {s.chunk}), comm::ReduceOp::sum);
  } else {
    p.work = shard_comm_.reduce_scatter(in.view(0, {padded}), shard_grads_.view(s.local_offset, {s.chunk}),
                                        comm::ReduceOp::sum);
  }
  reduces_.push_back(std::move(p));
  const int64_t elem = low_reduce() ? 2 : 4, wire = padded / shard_comm_.size() * (shard_comm_.size() - 1) * elem;
  ++stats_.reduce_scatters;
  stats_.reduce_scatter_payload_bytes += padded * elem;
  stats_.wire_bytes += wire;
  stats_.comm.wire_bytes += wire;
}

void Fsdp::advance_oldest_reduce() {
  ST_ASSERT(!reduces_.empty());
  PendingReduce& p = reduces_.front();
  if (p.work) {
    {
      telemetry::Span span("wait reduce-scatter", "comm", p.block);
      p.work->wait();
    }
    record(*p.work, shard_comm_.size());
    p.work.reset();
    if (low_reduce()) {  // the bf16 sum widened into the f32 gradient shard
      const BlockShard& s = layout_.block(p.block);
      ops::convert(shard_grads_.view(s.local_offset, {s.chunk}), shard_grads_low_.view(s.local_offset, {s.chunk}));
    }
    grads_.release(std::exchange(p.slot, -1));
    if (replica_comm_) {
      // The shard group's sum of this chunk, summed over the other nodes'
      // copies of it.
      const BlockShard& s = layout_.block(p.block);
      p.replica = replica_comm_->allreduce(shard_grads_.view(s.local_offset, {s.chunk}), comm::ReduceOp::sum);
      const int64_t r = replica_comm_->size(), bytes = s.chunk * int64_t(sizeof(float));
      ++stats_.replica_allreduces;
      stats_.replica_allreduce_payload_bytes += bytes;
      stats_.wire_bytes += 2 * (r - 1) * bytes / r;
      stats_.comm.wire_bytes += 2 * (r - 1) * bytes / r;
      return;
    }
  } else {
    {
      telemetry::Span span("wait replica all-reduce", "comm", p.block);
      p.replica->wait();
    }
    record(*p.replica, replica_comm_->size());
  }
  reduces_.pop_front();
}

void Fsdp::wait_gradients(int b) {
  while (std::any_of(reduces_.begin(), reduces_.end(), [b](const PendingReduce& p) { return p.block == b; }))
    advance_oldest_reduce();
}

void Fsdp::wait_gradients() {
  while (!reduces_.empty()) advance_oldest_reduce();
}

int64_t collectives_per_step(int64_t blocks, ShardingMode mode, int64_t micro_batches) {
  const int64_t gathers_per_pass = mode == ShardingMode::shard_grad_op ? blocks : 2 * blocks - 1;
  return micro_batches * gathers_per_pass + blocks + (mode == ShardingMode::hybrid ? blocks : 0);
}

void Fsdp::clip_grad_norm(double max_norm) {
  wait_gradients();
  // On the shards' device: on a GPU the squared norm never visits the host.
  Tensor sq = Tensor::empty({1}, DType::f32, device_);
  ops::sum_squares(sq, shard_grads_);                      // padding holds zeros
  shard_comm_.allreduce(sq, comm::ReduceOp::sum)->wait();  // replicas hold the same shards
  ops::clip_to_squared_norm(shard_grads_, sq, max_norm);
}

void Fsdp::loaded() {
  for (int b = 0; b < model_.num_blocks(); ++b) {
    ST_ASSERT(state_[size_t(b)] != State::in_flight);
    if (state_[size_t(b)] == State::gathered) free_block(b);
  }
}

std::unique_ptr<optim::Optimizer> Fsdp::make_optimizer(const optim::OptimizerConfig& config,
                                                       const std::vector<optim::ParamRange>& full) {
  return optim::make_optimizer(config, shard_numel(), shard_optimizer_ranges(full), device_);
}

void Fsdp::update(optim::Optimizer& optimizer, float lr, double max_norm, double& optimizer_s) {
  if (max_norm > 0) {
    clip_grad_norm(max_norm);  // waits for every gradient shard
    timed_optimizer(optimizer_s, -1, [&] { optimizer.step(shard_params_, shard_grads_, lr); });
    return;
  }
  for (int blk = model_.num_blocks() - 1; blk >= 0; --blk) {
    wait_gradients(blk);
    const BlockShard& sh = layout_.block(blk);
    timed_optimizer(optimizer_s, blk, [&] {
      optimizer.update(shard_params_, shard_grads_, lr, sh.local_offset, sh.local_offset + sh.chunk);
    });
  }
  optimizer.finish_step();
}

CheckpointView Fsdp::checkpoint_view() {
  CheckpointView v;
  v.params = shard_params_;
  v.read = fsdp_shard(layout_, shard_rank());
  if (replica_rank() == 0) v.write = v.read;
  return v;
}

std::string Fsdp::describe(const PlanInputs& in) const {
  const FsdpMemory mem =
      fsdp_memory(model_.flat(), shard_group_size(), in.state_floats_per_param, options_, in.micro_batches > 1);
  const int world = comm_.size();
  const char* group = options_.shard_group_size > 0 ? "group" : "node";  // HYBRID's
  const std::string how =
      options_.mode == ShardingMode::shard_grad_op ? fmt::format("SHARD_GRAD_OP over {} ranks", world)
      : options_.mode == ShardingMode::hybrid
          ? fmt::format("HYBRID (FULL_SHARD over the {} ranks of each {}, replicated over {} {}(s))",
                        shard_group_size(), group, replicas(), group)
          : fmt::format("FULL_SHARD over {} ranks", world);
  const std::string gemms =
      !low_params() ? std::string()
      : !device_.is_cpu()
          ? ", GEMMs on bf16 operands"
          : fmt::format(", GEMMs on bf16 operands ({})", cpu::native_bf16_gemm()
                                                             ? "OpenBLAS sbgemm"
                                                             : "rounded, through sgemm: this OpenBLAS has no sbgemm");
  return fmt::format(
      "fsdp: {}, {} all-gather(s) prefetched, parameters gathered in {}, gradients reduced in {}{}; per rank: "
      "parameter + gradient + optimizer shards {:.2f} MiB (DDP: {:.2f} MiB); with the gather and gradient buffers "
      "{:.2f} MiB in all{}",
      how, options_.prefetch, name_of(options_.param_dtype), name_of(options_.reduce_dtype), gemms,
      double(mem.persistent_bytes) / (1 << 20), double(mem.ddp_persistent_bytes) / (1 << 20),
      double(mem.implementation_bytes) / (1 << 20),
      device_.is_cpu() ? std::string()
                       : "\n[init] warning: FSDP on a GPU runs because SHARDTRAIN_UNVERIFIED_GPU_FSDP=1; its device "
                         "path has not yet been checked on a GPU (scripts/gpu-check.sh checks it)");
}

Tensor Fsdp::full_parameters() {
  Tensor full = Tensor::zeros({model_.flat().numel()});  // on the host
  Tensor gathered = Tensor::empty({layout_.max_padded_numel()}, DType::f32, device_);
  for (int b = 0; b < model_.num_blocks(); ++b) {
    const BlockShard& s = layout_.block(b);
    shard_comm_.allgather(shard_params_.view(s.local_offset, {s.chunk}), gathered.view(0, {layout_.padded_numel(b)}))
        ->wait();
    copy_tensor(full.view(s.flat_offset, {s.numel}), gathered.view(0, {s.numel}));
  }
  return full;
}

void Fsdp::record(comm::Work& w, int group_size) { stats_.comm.add_completed(w, group_size); }

FsdpStats Fsdp::take_fsdp_stats() {
  FsdpStats s = stats_;
  stats_ = {};
  return s;
}

}  // namespace shardtrain::parallel
