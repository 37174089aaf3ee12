// The one place that knows every strategy: a name and how to make its spec.
// A new strategy is a file pair in this folder and one row here.
#include "runtime/parallel/strategy.h"

#include "runtime/core/error.h"
#include "runtime/parallel/ddp.h"
#include "runtime/parallel/fsdp.h"
#include "runtime/parallel/none_strategy.h"
#include "runtime/parallel/zero1.h"

#include <functional>

namespace shardtrain::parallel {
namespace {

struct Entry {
  const char* name;
  std::function<std::unique_ptr<StrategySpec>(const ParallelOptions&)> make;
};

template <typename Spec>
Entry entry(const char* name) {
  return {name, [](const ParallelOptions& o) -> std::unique_ptr<StrategySpec> { return std::make_unique<Spec>(o); }};
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = {
      entry<NoneSpec>("none"),
      entry<DdpSpec>("ddp"),
      entry<Zero1Spec>("zero1"),
      entry<FsdpSpec>("fsdp"),
  };
  return all;
}

}  // namespace

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  for (const Entry& e : entries()) names.emplace_back(e.name);
  return names;
}

std::unique_ptr<StrategySpec> make_strategy_spec(const ParallelOptions& options) {
  std::string valid;
  for (const Entry& e : entries()) {
    if (options.strategy == e.name) return e.make(options);
    valid += fmt::format("{}\"{}\"", valid.empty() ? "" : ", ", e.name);
  }
  throw Error(fmt::format("parallel.strategy \"{}\" is not a strategy (choose {})", options.strategy, valid));
}

}  // namespace shardtrain::parallel
