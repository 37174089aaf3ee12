// Column sums of a row-major matrix on the GPU (device pointers, compute
// stream): bias gradients, out[c] (+)= sum over rows n of x[n, c].
//
// One thread per column adding all N rows in order (what the CPU does) left
// most of the GPU idle: C threads, each making N dependent steps (estimated
// at about 0.3 ms per call at the wide GPT's 8,192 rows, not yet measured:
// docs/BENCHMARKS.md). Here
// in two stages: blocks of 64 columns by kColumnSumRows rows write partial
// sums (rows in order), then one thread per column adds the chunks in order
// onto out (or 0). The order depends on N and C only, so the sums are
// deterministic; they differ from the CPU's single pass by rounding.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

inline constexpr int64_t kColumnSumRows = 64;

// x [N, C]; out [C] overwritten, or added to when `accumulate` (with N == 0:
// zeroed, or left as it is). Uses scratch(ScratchSlot::reduce).
void column_sums(float* out, const float* x, int64_t N, int64_t C, bool accumulate);

}  // namespace shardtrain::cuda
