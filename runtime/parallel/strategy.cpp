#include "runtime/parallel/strategy.h"

namespace shardtrain::parallel {

void StrategySpec::check(const Topology&) const {}

std::vector<ParallelOptions> StrategySpec::plan_variants(const ParallelOptions& base, const Topology& t) const {
  if (t.ranks <= 1) return {};  // on one rank every replicated strategy is "none"
  ParallelOptions o = base;
  o.strategy = name();
  return {o};
}

}  // namespace shardtrain::parallel
