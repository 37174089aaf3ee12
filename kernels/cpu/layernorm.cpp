#include "kernels/cpu/layernorm.h"

#include "kernels/cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace shardtrain::cpu {
namespace {

// One pass for the rest of a row's backward: the parameter gradients and dx.
// (A separate function with __restrict parameters: inlined into the row loop
// GCC gave up vectorizing it.)
void backward_row(float* __restrict dx, float* __restrict dw, float* __restrict db, const float* __restrict g,
                  const float* __restrict x, const float* __restrict weight, int64_t C, float m, float s,
                  float dnorm_mean, float dnorm_norm_mean) {
  for (int64_t i = 0; i < C; ++i) {
    const float norm = (x[i] - m) * s;
    const float dy = g[i];
    db[i] += dy;
    dw[i] += norm * dy;
    dx[i] = (weight[i] * dy - dnorm_mean - norm * dnorm_norm_mean) * s;
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps) {
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* x = in + n * C;
    float* o = out + n * C;
    const float m = detail::lane_sum(C, [&](int64_t i) { return x[i]; }) * inv_c;
    // Variance from the centered values (two passes over a row in cache):
    // E[x^2] - m^2 would cancel catastrophically when |m| >> std.
    const auto centered_square = [&](int64_t i) { return (x[i] - m) * (x[i] - m); };
    const float var = detail::lane_sum(C, centered_square) * inv_c;
    const float s = 1.0f / std::sqrt(var + eps);
    for (int64_t i = 0; i < C; ++i) o[i] = ((x[i] - m) * s) * weight[i] + bias[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        bool accumulate) {
  // The parameter gradients are sums over rows; zeroing C floats first is
  // negligible next to the N*C row work and keeps the row loop uniform.
  if (!accumulate) {
    std::fill(dweight, dweight + C, 0.0f);
    std::fill(dbias, dbias + C, 0.0f);
  }
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* x = in + n * C;
    const float* g = dout + n * C;
    float* dx = din + n * C;
    const float m = mean[n];
    const float s = rstd[n];
    // y = norm*w + b with norm = (x - m)*s. Through the normalization,
    // dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = w*dy.
    const float dnorm_mean = detail::lane_sum(C, [&](int64_t i) { return weight[i] * g[i]; }) * inv_c;
    const float dnorm_norm_mean =
        detail::lane_sum(C, [&](int64_t i) { return weight[i] * g[i] * ((x[i] - m) * s); }) * inv_c;
    backward_row(dx, dweight, dbias, g, x, weight, C, m, s, dnorm_mean, dnorm_norm_mean);
  }
}

}  // namespace shardtrain::cpu
