// What the bench subcommands report of repeated timings: the median, the
// middle of an even count being the mean of the two middle values.
#pragma once

#include <algorithm>
#include <vector>

namespace shardtrain::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace shardtrain::bench
