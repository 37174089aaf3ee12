// Integers as ranges, the way Linux writes cpulists: {0,1,2,3,8,10,11} ->
// "0-3,8,10-11". For rank lists and CPU sets alike.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

namespace shardtrain::doctor {

// `sorted` in ascending order.
inline std::string int_ranges(const std::vector<int>& sorted) {
  std::string s;
  for (size_t i = 0; i < sorted.size(); ++i) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += j > i ? fmt::format("{}-{}", sorted[i], sorted[j]) : std::to_string(sorted[i]);
    i = j;
  }
  return s;
}

}  // namespace shardtrain::doctor
