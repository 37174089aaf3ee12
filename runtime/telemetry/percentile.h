// Nearest-rank percentiles: the ceil(p * n)-th smallest of n values. Always
// one of the samples (no interpolation), so a median of step times is a step
// that happened; for an even count the median is the lower middle value.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardtrain::telemetry {

// p in [0, 1]; 0 for no values. Takes a copy: it sorts.
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  // The small slack keeps p * n = 19.000000000000004 from becoming rank 20.
  size_t k = static_cast<size_t>(std::ceil(p * n - 1e-9));
  k = std::clamp<size_t>(k, 1, values.size());
  return values[k - 1];
}

inline double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

}  // namespace shardtrain::telemetry
