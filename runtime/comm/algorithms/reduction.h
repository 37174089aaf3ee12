// The arithmetic of the reductions: element-wise sums of f32 or bf16 buffers
// with an optional scale fused in (averaging). bf16 is widened to f32, added,
// scaled and rounded to nearest even once per call: "each hop accumulates in
// f32 and rounds to bf16". Kept here rather than in kernels/cpu so that comm
// depends on core only, and because the fused scale and the bf16 hop are
// communication semantics, not layer math.
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::comm {

// dst[i] = (a[i] + b[i]) * scale for n elements of `dtype` (f32 or bf16). dst
// may alias a or b. scale == 1 skips the multiply (the sum is then bit-exact
// the same as without a scale).
void reduce_sum(DType dtype, void* dst, const void* a, const void* b, int64_t n, float scale);

// dst[i] = (((src[0][i] + src[1][i]) + src[2][i]) + ...) * scale: the n
// sources added in that order, each hop rounding to the dtype as reduce_sum
// does, so every rank that passes the same sources in the same order gets the
// same bits. dst may alias any source. Works through cache-sized blocks.
void reduce_sum_ordered(DType dtype, void* dst, const void* const* srcs, int n, int64_t count, float scale);

// x[i] *= scale (no-op for scale == 1).
void scale_inplace(DType dtype, void* x, int64_t n, float scale);

}  // namespace shardtrain::comm
