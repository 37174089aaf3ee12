#include "runtime/train/comm_volume.h"

#include <fmt/format.h>

namespace shardtrain::train {

std::string comm_volume_line(const parallel::WireTheory& theory, int64_t parameters, double measured) {
  return fmt::format(
      "[summary] communication volume per step and rank: {:.3f} MB as a ring would send it; theory {} x {:.3f} M "
      "parameters = {:.3f} MB (measured/theory {:.3f})",
      measured / 1e6, theory.formula, double(parameters) * 1e-6, theory.bytes / 1e6,
      theory.bytes > 0 ? measured / theory.bytes : 0.0);
}

}  // namespace shardtrain::train
