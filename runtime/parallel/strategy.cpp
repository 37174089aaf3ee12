#include "runtime/parallel/strategy.h"

#include "runtime/core/error.h"

namespace shardtrain::parallel {

void StrategySpec::check(const Topology&) const {}

std::vector<ParallelOptions> StrategySpec::plan_variants(const ParallelOptions& base, const Topology& t) const {
  if (t.ranks <= 1) return {};  // on one rank every replicated strategy is "none"
  ParallelOptions o = base;
  o.strategy = name();
  return {o};
}

void Strategy::device_update(optim::Optimizer&, float, double) {
  ST_ASSERT(false && "device_update() of a strategy whose update is not capturable");
}

}  // namespace shardtrain::parallel
