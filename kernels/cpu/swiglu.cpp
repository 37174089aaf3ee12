#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/vec_math.h"

#include <cmath>

namespace shardtrain::cpu {
namespace {

// sigmoid(g) and sigmoid(-g) = 1 - sigmoid(g), both without cancellation:
// e = e^{-|g|}, 1/(1 + e) is the larger, e/(1 + e) the smaller. (Named for
// this file: the library is a unity build.)
inline float swiglu_sigmoid(float g, float* sigmoid_neg) {
  const float e = detail::exp_nonpos(-std::fabs(g));
  const float inv = 1.0f / (1.0f + e);
  const bool pos = g >= 0.0f;
  *sigmoid_neg = detail::select(pos, e, 1.0f) * inv;
  return detail::select(pos, 1.0f, e) * inv;
}

}  // namespace

// Compute-bound (an exponential and a division per element), as GELU: the
// widest vectors the CPU has. Element by element, so every clone gives the
// same bits (vec_math.h).
ST_VECTOR_CLONES void swiglu_forward(float* h, const float* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gu + n * 2 * F;
    const float* u = g + F;
    float* o = h + n * F;
    for (int64_t i = 0; i < F; ++i) {
      float sig_neg;
      const float sig = swiglu_sigmoid(g[i], &sig_neg);
      o[i] = (g[i] * sig) * u[i];
    }
  }
}

ST_VECTOR_CLONES void swiglu_backward(float* dgu, const float* dh, const float* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gu + n * 2 * F;
    const float* u = g + F;
    const float* d = dh + n * F;
    float* dg = dgu + n * 2 * F;
    float* du = dg + F;
    for (int64_t i = 0; i < F; ++i) {
      const float x = g[i];
      float sig_neg;
      const float sig = swiglu_sigmoid(x, &sig_neg);
      const float silu = x * sig;
      // silu'(g) = sigmoid(g) + g sigmoid(g) (1 - sigmoid(g))
      //          = sigmoid(g) * (1 + g * sigmoid(-g)),
      // with sigmoid(-g) itself rather than 1 - sigmoid(g) (which cancels for
      // g >> 0). Finite for every finite g: past g ~ -87 sigmoid(g) is 0 and
      // the product is 0 times a finite number.
      const float dsilu = sig * (1.0f + x * sig_neg);
      dg[i] = (d[i] * u[i]) * dsilu;
      du[i] = d[i] * silu;
    }
  }
}

}  // namespace shardtrain::cpu
