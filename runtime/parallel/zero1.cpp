#include "runtime/parallel/zero1.h"

#include "runtime/core/device_memory.h"
#include "runtime/core/dtype_names.h"
#include "runtime/core/error.h"
#include "runtime/optim/clip.h"
#include "runtime/parallel/optimizer_span.h"
#include "runtime/telemetry/recorder.h"

#include <algorithm>

namespace shardtrain::parallel {
namespace {

constexpr int64_t kF32 = 4;
constexpr int64_t kSliceAlign = 16;  // elements: 64 bytes of f32

}  // namespace

StrategyMemory Zero1Spec::memory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const int n = in.topology.ranks;
  const int64_t slice = Zero1::slice_numel(flat.numel(), n);
  StrategyMemory m;
  m.components = {{"parameters", n * slice * kF32},
                  {"gradients", flat.numel() * kF32},
                  {"optimizer state shard", slice * kF32 * in.state_floats_per_param}};
  for (const MemoryComponent& c : m.components) m.persistent_bytes += c.bytes;
  if (options_.grad_dtype == DType::bf16) m.components.push_back({"bf16 gradient buckets", flat.numel() * 2});
  return m;
}

WireTheory Zero1Spec::wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const double n = in.topology.ranks, psi = double(flat.parameter_count());
  const double r = double(dtype_size(options_.grad_dtype));
  if (n <= 1) return {};
  return {(2 * r + kF32) * (n - 1) / n * psi, fmt::format("(2 x {} + 4)(N-1)/N B", r)};
}

int64_t Zero1Spec::collectives_per_step(const nn::FlatParameters& flat, int) const {
  return int64_t(Ddp::plan_buckets(flat, options_).size()) + 1;  // the buckets, then one all-gather
}

CommLayout Zero1Spec::comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const {
  CommLayout c;
  const int n = in.topology.ranks;
  if (n <= 1) return c;
  c.buckets = bucket_layout(flat, options_);
  c.update_gather_bytes = n * Zero1::slice_numel(flat.numel(), n) * kF32;
  return c;
}

std::unique_ptr<Strategy> Zero1Spec::start(nn::Model& model, comm::Communicator* comm) const {
  ST_CHECK(comm != nullptr, "zero1 needs a communicator");
  return std::make_unique<Zero1>(model, *comm, options_);
}

int64_t Zero1::slice_numel(int64_t flat_numel, int ranks) {
  const int64_t even = (flat_numel + ranks - 1) / ranks;
  return (even + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
}

Zero1::Zero1(nn::Model& model, comm::Communicator& comm, const DdpOptions& options)
    : model_(model), comm_(comm), ddp_(model, comm, options) {
  const int64_t numel = model.flat().numel();
  slice_ = slice_numel(numel, comm.size());
  begin_ = std::min(numel, comm.rank() * slice_);
  end_ = std::min(numel, begin_ + slice_);
  ST_CHECK(end_ > begin_,
           "zero1: the model's flat buffer ({} elements) is too small to give each of {} ranks a slice of {} "
           "(rank {} would own none); use ddp",
           numel, comm.size(), slice_, comm.rank());
  padded_ = Tensor::zeros({slice_ * comm.size()}, DType::f32, model.device());
  const Tensor front = padded_.view(0, {numel});
  copy_tensor(front, model.flat().params());
  model.replace_params(front);
}

std::string Zero1::describe(const PlanInputs& in) const {
  const double mib = double(1 << 20);
  return fmt::format(
      "zero1: gradients all-reduced in {} bucket(s) as {}; optimizer state sharded: this rank updates elements "
      "[{}, {}) of {} and keeps {:.2f} MiB of state (DDP: {:.2f} MiB); the updated slices all-gathered after "
      "each step",
      ddp_.buckets().size(), name_of(ddp_.options().grad_dtype), begin_, end_, model_.flat().numel(),
      double((end_ - begin_) * kF32 * in.state_floats_per_param) / mib,
      double(model_.flat().numel() * kF32 * in.state_floats_per_param) / mib);
}

Tensor Zero1::own(const Tensor& flat_buffer) const { return flat_buffer.view(begin_, {end_ - begin_}); }

std::unique_ptr<optim::Optimizer> Zero1::make_optimizer(const optim::OptimizerConfig& config,
                                                        const std::vector<optim::ParamRange>& full) {
  std::vector<optim::ParamRange> ranges;
  optim::append_ranges_within(full, begin_, end_, 0, ranges);
  return optim::make_optimizer(config, end_ - begin_, std::move(ranges), model_.device());
}

void Zero1::update(optim::Optimizer& optimizer, float lr, double max_norm, double& optimizer_s) {
  const nn::FlatParameters& flat = model_.flat();
  const Tensor params = own(flat.params()), grads = own(flat.grads());
  if (max_norm > 0) {
    ddp_.wait_gradients();  // the norm is over every gradient, which every rank holds
    timed_optimizer(optimizer_s, -1, [&] {
      optim::clip_grad_norm(flat.grads(), max_norm);
      optimizer.step(params, grads, lr);
    });
  } else {
    // This rank's part of each bucket as soon as the bucket is reduced.
    for (size_t i = 0; i < ddp_.buckets().size(); ++i) {
      ddp_.wait_bucket(i);
      const Bucket& b = ddp_.buckets()[i];
      const int64_t lo = std::max(b.offset, begin_), hi = std::min(b.offset + b.numel, end_);
      if (lo < hi)
        timed_optimizer(optimizer_s, int64_t(i),
                        [&] { optimizer.update(params, grads, lr, lo - begin_, hi - begin_); });
    }
    optimizer.finish_step();
  }
  gather_parameters();
}

void Zero1::gather_parameters() {
  const int n = comm_.size();
  comm::WorkPtr w = comm_.allgather(padded_.view(comm_.rank() * slice_, {slice_}), padded_);
  stats_.wire_bytes += (n - 1) * slice_ * kF32;
  {
    telemetry::Span span("wait allgather", "comm");
    w->wait();
  }
  stats_.add_completed(*w, n);
}

CommStats Zero1::take_stats() {
  CommStats s = ddp_.take_stats();
  s.add(stats_);
  stats_ = {};
  return s;
}

CheckpointView Zero1::checkpoint_view() {
  const Pieces mine = {{begin_, end_, 0}};
  return {own(model_.flat().params()), mine, mine};
}

void Zero1::loaded() {
  gather_parameters();
  stats_ = {};  // the load's, not a step's
}

}  // namespace shardtrain::parallel
