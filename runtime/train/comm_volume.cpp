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
                         int world, int shard_group, int gather_bytes, int reduce_bytes, int micro_batches) {
  // FSDP gathers for every micro-batch: g counts k times.
  const double psi = double(parameters), n = world, g = double(gather_bytes) * micro_batches, r = reduce_bytes;
  if (world <= 1) return 0.0;
  if (hybrid(strategy, fsdp_sharding)) {
    const double s = shard_group, nodes = double(world) / s;
    // Within the node as FULL_SHARD; across nodes the f32 gradient shard.
    return (2 * g + r) * (s - 1) / s * psi + 2 * (nodes - 1) / nodes * 4 * psi / s;
  }
  if (strategy == "fsdp" && fsdp_sharding == "full") return (2 * g + r) * (n - 1) / n * psi;
  if (strategy == "fsdp") return (g + r) * (n - 1) / n * psi;
  if (strategy == "ddp") return 2 * r * (n - 1) / n * psi;
  return 0.0;
}

std::string comm_volume_line(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                             int world, double measured, int shard_group, int gather_bytes, int reduce_bytes,
                             int micro_batches) {
  const double theory = theory_wire_bytes(strategy, fsdp_sharding, parameters, world, shard_group, gather_bytes,
                                          reduce_bytes, micro_batches);
  const int r = reduce_bytes;
  // What is gathered per step, written out: "4" or, with k micro-batches, "k x 4".
  const std::string g = micro_batches > 1 && strategy == "fsdp" ? fmt::format("{} x {}", micro_batches, gather_bytes)
                                                                : fmt::format("{}", gather_bytes);
  const std::string formula =
      hybrid(strategy, fsdp_sharding)
          ? fmt::format("({}+{}+{})(n-1)/n + 2(R-1)/(R n) x 4 B with n = {}, R = {},", g, g, r, shard_group,
                        world / std::max(1, shard_group))
      : strategy == "fsdp" && fsdp_sharding == "full" ? fmt::format("({}+{}+{})(N-1)/N B", g, g, r)
      : strategy == "fsdp"                            ? fmt::format("({}+{})(N-1)/N B", g, r)
                                                      : fmt::format("2 x {}(N-1)/N B", r);
  return fmt::format(
      "[summary] communication volume per step and rank: {:.3f} MB as a ring would send it; theory {} x {:.3f} M "
      "parameters = {:.3f} MB (measured/theory {:.3f})",
      measured / 1e6, formula, double(parameters) * 1e-6, theory / 1e6, theory > 0 ? measured / theory : 0.0);
}

}  // namespace shardtrain::train
