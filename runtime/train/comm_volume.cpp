#include "runtime/train/comm_volume.h"

#include <fmt/format.h>

#include <algorithm>

namespace shardtrain::train {

namespace {
bool hybrid(const std::string& strategy, const std::string& sharding) {
  return strategy == "fsdp" && sharding == "hybrid";
}
}  // namespace

double theory_wire_bytes(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                         int world, int shard_group) {
  const double psi = double(parameters) * 4.0, n = world;
  if (world <= 1) return 0.0;
  if (hybrid(strategy, fsdp_sharding)) {
    const double g = shard_group, r = double(world) / g;
    return 3 * (g - 1) / g * psi + 2 * (r - 1) / r * psi / g;
  }
  if (strategy == "fsdp" && fsdp_sharding == "full") return 3 * (n - 1) / n * psi;
  if (strategy == "fsdp" || strategy == "ddp") return 2 * (n - 1) / n * psi;
  return 0.0;
}

std::string comm_volume_line(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                             int world, double measured, int shard_group) {
  const double theory = theory_wire_bytes(strategy, fsdp_sharding, parameters, world, shard_group);
  const std::string formula = hybrid(strategy, fsdp_sharding)
                                  ? fmt::format("(3(n-1)/n + 2(R-1)/(R n)) with n = {}, R = {},", shard_group,
                                                world / std::max(1, shard_group))
                              : strategy == "fsdp" && fsdp_sharding == "full" ? "3(N-1)/N"
                                                                              : "2(N-1)/N";
  return fmt::format(
      "[summary] communication volume per step and rank: {:.3f} MB as a ring would send it; theory {} x {:.3f} MB "
      "of parameters = {:.3f} MB (measured/theory {:.3f})",
      measured / 1e6, formula, double(parameters) * 4e-6, theory / 1e6, theory > 0 ? measured / theory : 0.0);
}

}  // namespace shardtrain::train
