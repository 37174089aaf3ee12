#include "runtime/optim/adamw.h"
#include "runtime/optim/sgd.h"

namespace shardtrain::optim {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t numel,
                                          std::vector<ParamRange> ranges) {
  ST_CHECK(config.lr >= 0, "optim.lr must not be negative, got {}", config.lr);
  ST_CHECK(config.weight_decay >= 0, "optim.weight_decay must not be negative, got {}",
           config.weight_decay);
  for (const ParamRange& r : ranges)
    ST_ASSERT(r.offset >= 0 && r.numel >= 0 && r.offset + r.numel <= numel);
  if (config.kind == "sgd") return std::make_unique<Sgd>(config, numel, std::move(ranges));
  if (config.kind == "adamw") return std::make_unique<AdamW>(config, numel, std::move(ranges));
  throw Error(fmt::format("optim.kind \"{}\" is not an optimizer (choose \"sgd\" or \"adamw\")",
                          config.kind));
}

}  // namespace shardtrain::optim
