#include "runtime/optim/adamw.h"
#include "runtime/optim/sgd.h"

#include <algorithm>

namespace shardtrain::optim {

void Optimizer::update(const Tensor& params, const Tensor& grads, float lr, int64_t begin,
                       int64_t end) {
  for (const ParamRange& r : ranges_) {
    const int64_t lo = std::max(begin, r.offset), hi = std::min(end, r.offset + r.numel);
    if (lo < hi) update_run(params, grads, lr, lo, hi - lo, r.decay);
  }
}

void append_ranges_within(const std::vector<ParamRange>& full, int64_t begin, int64_t end, int64_t at,
                          std::vector<ParamRange>& out) {
  for (const ParamRange& r : full) {
    const int64_t lo = std::max(begin, r.offset), hi = std::min(end, r.offset + r.numel);
    if (lo >= hi) continue;
    const int64_t local = at + (lo - begin);
    if (!out.empty() && out.back().decay == r.decay && out.back().offset + out.back().numel == local)
      out.back().numel += hi - lo;
    else
      out.push_back({local, hi - lo, r.decay});
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t numel,
                                          std::vector<ParamRange> ranges, Device device) {
  ST_CHECK(config.lr >= 0, "optim.lr must not be negative, got {}", config.lr);
  ST_CHECK(config.weight_decay >= 0, "optim.weight_decay must not be negative, got {}",
           config.weight_decay);
  for (const ParamRange& r : ranges)
    ST_ASSERT(r.offset >= 0 && r.numel >= 0 && r.offset + r.numel <= numel);
  if (config.kind == "sgd") return std::make_unique<Sgd>(config, numel, std::move(ranges), device);
  if (config.kind == "adamw") return std::make_unique<AdamW>(config, numel, std::move(ranges), device);
  throw Error(fmt::format("optim.kind \"{}\" is not an optimizer (choose \"sgd\" or \"adamw\")",
                          config.kind));
}

}  // namespace shardtrain::optim
