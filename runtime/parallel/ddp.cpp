#include "runtime/parallel/ddp.h"

#include "kernels/ops.h"
#include "runtime/core/clock.h"
#include "runtime/core/dtype_names.h"
#include "runtime/core/fnv1a.h"
#include "runtime/parallel/none_strategy.h"
#include "runtime/parallel/optimizer_span.h"
#include "runtime/telemetry/recorder.h"

#include <algorithm>

namespace shardtrain::parallel {
namespace {

// FNV-1a over the model's parameter names and shapes: equal on every rank
// that built the same model.
uint32_t layout_hash(const nn::FlatParameters& flat) {
  Fnv1a h;
  for (const nn::ParamEntry& e : flat.entries()) {
    h.add(e.name.data(), e.name.size());
    for (int d = 0; d < e.spec.shape.ndim(); ++d) {
      const int64_t extent = e.spec.shape[d];
      h.add(&extent, sizeof extent);
    }
  }
  return h.value();
}

// Work::algorithm() is a string; trace spans keep only pointers to literals.
const char* algorithm_literal(const std::string& a) {
  for (const char* known : {"shm", "oneshot", "mpi", "ring", "hierarchical", "local"})
    if (a == known) return known;
  return "other";
}

}  // namespace

Ddp::Ddp(nn::Model& model, comm::Communicator& comm, const DdpOptions& options)
    : model_(model), comm_(comm), options_(options) {
  validate(options);
  buckets_ = plan_buckets(model.flat(), options);
  bucket_of_block_.resize(model.flat().blocks().size());
  for (size_t i = 0; i < buckets_.size(); ++i)
    for (int blk = buckets_[i].first_block; blk <= buckets_[i].last_block; ++blk) bucket_of_block_[size_t(blk)] = i;
  pending_.assign(buckets_.size(), 0);
  works_.resize(buckets_.size());
  if (options.grad_dtype == DType::bf16)
    for (const Bucket& bucket : buckets_) wire_.push_back(Tensor::empty({bucket.numel}, DType::bf16, model.device()));
}

std::vector<Bucket> Ddp::plan_buckets(const nn::FlatParameters& flat, const DdpOptions& options) {
  // Buckets of whole Blocks, last Block first.
  std::vector<Bucket> buckets;
  const auto& blocks = flat.blocks();
  for (int b = int(blocks.size()) - 1; b >= 0; --b) {
    const int64_t bytes = blocks[size_t(b)].numel * int64_t(sizeof(float));
    const double cap_mb = buckets.size() <= 1 ? options.first_bucket_mb : options.bucket_mb;
    const bool fits =
        !buckets.empty() && double(buckets.back().numel * int64_t(sizeof(float)) + bytes) <= cap_mb * (1 << 20);
    if (!fits) buckets.push_back({b, b, 0, 0});
    Bucket& bucket = buckets.back();  // grows downwards: blocks b..last_block
    bucket.first_block = b;
    bucket.offset = blocks[size_t(b)].offset;
    bucket.numel += blocks[size_t(b)].numel;
  }
  return buckets;
}

void Ddp::broadcast_parameters() {
  const nn::FlatParameters& flat = model_.flat();
  Tensor mine = Tensor::empty({3}, DType::i32);
  mine.i32()[0] = model_.num_blocks();
  mine.i32()[1] = int32_t(flat.parameter_count());
  mine.i32()[2] = int32_t(layout_hash(flat));
  Tensor all = Tensor::empty({3 * int64_t(comm_.size())}, DType::i32);
  comm_.allgather(mine, all)->wait();
  std::string mismatched;
  for (int r = 1; r < comm_.size(); ++r) {
    const int32_t* a = all.i32() + 3 * int64_t(r);
    if (a[0] != all.i32()[0] || a[1] != all.i32()[1] || a[2] != all.i32()[2])
      mismatched += fmt::format("{}rank {} has {} blocks, {} parameters (layout {:08x})",
                                mismatched.empty() ? "" : "; ", r, a[0], a[1], uint32_t(a[2]));
  }
  ST_CHECK(mismatched.empty(),
           "DDP: the model differs across ranks: rank 0 has {} blocks, {} parameters (layout "
           "{:08x}); {}",
           all.i32()[0], all.i32()[1], uint32_t(all.i32()[2]), mismatched);
  comm_.broadcast(flat.params(), 0)->wait();
}

void Ddp::before_backward(int block) {
  // A backward starts with the last block: a fresh round of buckets.
  if (block == model_.num_blocks() - 1) {
    for (size_t i = 0; i < buckets_.size(); ++i) pending_[i] = buckets_[i].last_block - buckets_[i].first_block + 1;
    ready_.clear();
  }
}

void Ddp::after_backward(int block) {
  const size_t b = bucket_of_block_[size_t(block)];
  if (--pending_[b] != 0 || !sync_) return;
  ready_.push_back(b);
  if (int64_t(ready_.size()) == options_.bucket_batch || b + 1 == buckets_.size()) launch_ready();
}

void Ddp::launch_ready() {
  if (ready_.size() == 1) {
    launch(ready_.front());
  } else {
    comm_.begin_group();
    try {
      for (size_t b : ready_) launch(b);
    } catch (...) {
      comm_.end_group();  // an open group would defer every later collective
      throw;
    }
    comm_.end_group();
  }
  ready_.clear();
}

void Ddp::scatter_into(const ShardLayout& layout, const Tensor& grads, const Tensor& shard_grads) {
  ST_CHECK(layout.blocks().size() == buckets_.size() && layout.world() == comm_.size(),
           "ddp: a scatter layout of {} ranges over {} ranks for {} buckets over {} ranks", layout.blocks().size(),
           layout.world(), buckets_.size(), comm_.size());
  scatter_ = &layout;
  scatter_grads_ = grads;
  shard_grads_ = shard_grads;
  // The bf16 copies take the padding too, as zeros.
  for (size_t b = 0; b < wire_.size(); ++b)
    wire_[b] = Tensor::zeros({layout.padded_numel(scatter_slot(b))}, DType::bf16, model_.device());
}

void Ddp::launch(size_t b) {
  const Bucket& bucket = buckets_[b];
  Tensor grads = model_.flat().grads().view(bucket.offset, {bucket.numel});
  if (!wire_.empty()) ops::convert(wire_[b].view(0, {bucket.numel}), grads);
  const int64_t n = comm_.size();
  if (scatter_ == nullptr) {
    works_[b] = comm_.allreduce(wire_.empty() ? grads : wire_[b], comm::ReduceOp::sum);
    stats_.wire_bytes += 2 * (n - 1) * works_[b]->bytes() / n;
    return;
  }
  const BlockShard& s = scatter_->block(scatter_slot(b));
  const Tensor in = wire_.empty() ? scatter_grads_.view(bucket.offset, {s.chunk * n}) : wire_[b];
  const Tensor out =
      wire_.empty() ? shard_grads_.view(s.local_offset, {s.chunk}) : in.view(comm_.rank() * s.chunk, {s.chunk});
  works_[b] = comm_.reduce_scatter(in, out, comm::ReduceOp::sum);
  stats_.wire_bytes += (n - 1) * works_[b]->bytes() / n;
}

void Ddp::wait_bucket(size_t b) {
  if (!works_[b]) return;  // not launched: a no_sync backward
  comm::Work& w = *works_[b];
  {
    telemetry::Span span("wait bucket", "comm", int64_t(b));
    w.wait();
  }
  stats_.add_completed(w, comm_.size());
  telemetry::Recorder& recorder = telemetry::Recorder::instance();
  if (recorder.enabled()) {
    if (comm_lane_ < 0) comm_lane_ = recorder.lane("comm engine");
    telemetry::SpanEvent e;
    e.name = scatter_ != nullptr ? "reduce_scatter" : "allreduce";
    e.category = "comm";
    e.start_s = w.started_at();
    e.end_s = w.finished_at();
    e.tid = comm_lane_;
    e.bytes = w.bytes();
    e.seq = w.seq();
    e.detail = algorithm_literal(w.algorithm());
    recorder.record(e);
  }
  if (scatter_ != nullptr)
    scattered(b);
  else if (!wire_.empty())
    ops::convert(model_.flat().grads().view(buckets_[b].offset, {buckets_[b].numel}), wire_[b]);
  works_[b].reset();
}

void Ddp::scattered(size_t b) {
  const BlockShard& s = scatter_->block(scatter_slot(b));
  const Tensor chunk = shard_grads_.view(s.local_offset, {s.chunk});
  if (!wire_.empty()) ops::convert(chunk, wire_[b].view(comm_.rank() * s.chunk, {s.chunk}));
  // Past the bucket's end the chunk holds sums of the neighbouring bucket's
  // gradients (or of zeros): padding, which norms and updates must see as 0.
  const ShardLayout::Owned own = scatter_->owned(scatter_slot(b), comm_.rank());
  const int64_t valid = own.end - own.begin;
  if (valid < s.chunk) chunk.view(valid, {s.chunk - valid}).fill_zero();
}

void Ddp::wait_gradients() {
  for (size_t b = 0; b < buckets_.size(); ++b) wait_bucket(b);
}

void Ddp::update(optim::Optimizer& optimizer, float lr, double clip_grad_norm, double& optimizer_s) {
  const nn::FlatParameters& flat = model_.flat();
  if (clip_grad_norm > 0) {
    wait_gradients();
    replicated_update(flat, optimizer, lr, clip_grad_norm, optimizer_s);
    return;
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    wait_bucket(i);
    const Bucket& bucket = buckets_[i];
    timed_optimizer(optimizer_s, int64_t(i), [&] {
      optimizer.update(flat.params(), flat.grads(), lr, bucket.offset, bucket.offset + bucket.numel);
    });
  }
  optimizer.finish_step();
}

std::unique_ptr<optim::Optimizer> Ddp::make_optimizer(const optim::OptimizerConfig& config,
                                                      const std::vector<optim::ParamRange>& full) {
  return optim::make_optimizer(config, model_.flat().numel(), full, model_.device());
}

CheckpointView Ddp::checkpoint_view() { return replicated_view(model_.flat(), comm_.rank(), comm_.size()); }

std::string Ddp::describe(const PlanInputs&) const {
  std::string buckets;
  for (const Bucket& b : buckets_)
    buckets += fmt::format(" [blocks {}-{}: {:.2f} MiB]", b.first_block, b.last_block, double(b.numel) * 4 / (1 << 20));
  return fmt::format(
      "ddp: {} gradient bucket(s){}, gradients travel as {}{}", buckets_.size(), buckets, name_of(options_.grad_dtype),
      options_.bucket_batch > 1 ? fmt::format("; issued {} at a time as one group", options_.bucket_batch)
                                : std::string());
}

CommStats Ddp::take_stats() {
  CommStats s = stats_;
  stats_ = {};
  return s;
}

}  // namespace shardtrain::parallel
