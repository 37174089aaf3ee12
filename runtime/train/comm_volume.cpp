#include "runtime/train/comm_volume.h"

#include <fmt/format.h>

namespace shardtrain::train {

double theory_wire_bytes(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                         int world) {
  const double psi = double(parameters) * 4.0, n = world;
  if (world <= 1) return 0.0;
  if (strategy == "fsdp" && fsdp_sharding == "full") return 3 * (n - 1) / n * psi;
  if (strategy == "fsdp" || strategy == "ddp") return 2 * (n - 1) / n * psi;
  return 0.0;
}

std::string comm_volume_line(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                             int world, double measured) {
  const double theory = theory_wire_bytes(strategy, fsdp_sharding, parameters, world);
  const char* formula = strategy == "fsdp" && fsdp_sharding == "full" ? "3(N-1)/N" : "2(N-1)/N";
  return fmt::format(
      "[summary] communication volume per step and rank: {:.3f} MB as a ring would send it; theory {} x {:.3f} MB "
      "of parameters = {:.3f} MB (measured/theory {:.3f})",
      measured / 1e6, formula, double(parameters) * 4e-6, theory / 1e6, theory > 0 ? measured / theory : 0.0);
}

}  // namespace shardtrain::train
