// DdpSpec: DDP before it runs (strategy.h).
#include "runtime/parallel/ddp.h"

#include "runtime/core/dtype_names.h"
#include "runtime/parallel/none_strategy.h"

namespace shardtrain::parallel {

void validate(const DdpOptions& o) {
  ST_CHECK(o.bucket_mb > 0 && o.first_bucket_mb > 0,
           "parallel.ddp.bucket_mb and parallel.ddp.first_bucket_mb must be positive");
  ST_CHECK(o.bucket_batch >= 1, "parallel.ddp.bucket_batch must be at least 1 (it is {})", o.bucket_batch);
  ST_CHECK(o.grad_dtype == DType::f32 || o.grad_dtype == DType::bf16,
           "parallel.ddp.grad_dtype {} is not one (choose {})", name_of(o.grad_dtype), enum_choices<DType>());
}

StrategyMemory DdpSpec::memory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  StrategyMemory m = replicated_memory(flat, in.state_floats_per_param);
  if (options_.grad_dtype == DType::bf16) m.components.push_back({"bf16 gradient buckets", flat.numel() * 2});
  return m;
}

// One all-reduce of every gradient per step (no_sync: also with micro-batches).
WireTheory DdpSpec::wire_theory(const nn::FlatParameters& flat, const PlanInputs& in) const {
  const double n = in.topology.ranks, r = double(dtype_size(options_.grad_dtype));
  if (n <= 1) return {};
  return {2 * r * (n - 1) / n * double(flat.parameter_count()), fmt::format("2 x {}(N-1)/N B", r)};
}

int64_t DdpSpec::collectives_per_step(const nn::FlatParameters& flat, int) const {
  return int64_t(Ddp::plan_buckets(flat, options_).size());
}

std::vector<DdpBucketLayout> bucket_layout(const nn::FlatParameters& flat, const DdpOptions& options) {
  std::vector<DdpBucketLayout> out;
  for (const Bucket& b : Ddp::plan_buckets(flat, options))
    out.push_back({b.first_block, b.last_block, b.numel * int64_t(dtype_size(options.grad_dtype))});
  return out;
}

CommLayout DdpSpec::comm_layout(const nn::FlatParameters& flat, const PlanInputs& in) const {
  CommLayout c;
  if (in.topology.ranks > 1) c.buckets = bucket_layout(flat, options_);
  return c;
}

std::unique_ptr<Strategy> DdpSpec::start(nn::Model& model, comm::Communicator* comm) const {
  ST_CHECK(comm != nullptr, "ddp needs a communicator");
  return std::make_unique<Ddp>(model, *comm, options_);
}

}  // namespace shardtrain::parallel
