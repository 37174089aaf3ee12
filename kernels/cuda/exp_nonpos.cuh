// e^x for x <= 0: the CPU's detail::exp_nonpos (kernels/cpu/vec_math.h)
// written for the device, step by step, each operation rounded on its own
// (no FMA contraction), so an exponential here has the same bits as on the
// CPU (GELU and softmax match the CPU kernels exactly or to a few ulps).
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

__device__ inline float exp_nonpos(float x) {
  const float t = __fadd_rn(__fmul_rn(x, 1.44269504f), 12582912.0f);
  const float n = __fsub_rn(t, 12582912.0f);
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, 0.693359375f)), __fmul_rn(n, -2.12194440e-4f));
  float p = 1.0f / 5040;
  p = __fadd_rn(1.0f / 720, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 120, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 24, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 6, __fmul_rn(r, p));
  p = __fadd_rn(1.0f / 2, __fmul_rn(r, p));
  p = __fadd_rn(1.0f, __fmul_rn(r, p));
  p = __fadd_rn(1.0f, __fmul_rn(r, p));
  const uint32_t n_bits = __float_as_uint(t) - 0x4B400000u;
  const float y = __fmul_rn(p, __uint_as_float((n_bits + 127u) << 23));
  return x < -87.3f ? 0.0f : y;
}

}  // namespace shardtrain::cuda
