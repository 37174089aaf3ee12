#include "kernels/cpu/layernorm.h"

#include "kernels/cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace shardtrain::cpu {
namespace {

// One row's forward. The fused residual variant calls the same function on
// the sum it has just written, so the two give the same bits by construction.
void forward_row(float* o, float* mean, float* rstd, const float* x, const float* weight, const float* bias, int64_t C,
                 float inv_c, float eps) {
  const float m = detail::lane_sum(C, [&](int64_t i) { return x[i]; }) * inv_c;
  // Variance from the centered values (two passes over a row in cache):
  // E[x^2] - m^2 would cancel catastrophically when |m| >> std.
  const auto centered_square = [&](int64_t i) { return (x[i] - m) * (x[i] - m); };
  const float var = detail::lane_sum(C, centered_square) * inv_c;
  const float s = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < C; ++i) o[i] = ((x[i] - m) * s) * weight[i] + bias[i];
  *mean = m;
  *rstd = s;
}

// What backward_row does with a row's input gradient d: store it, add the
// residual's gradient r (d + r[i], the order of add(din, din, dresidual)),
// or add what din already holds (din is dresidual itself: one pointer, so
// __restrict stays true).
enum class DinMode { overwrite, add, add_in_place };

// One pass for the rest of a row's backward: the parameter gradients and dx.
// (A separate function with __restrict parameters: inlined into the row loop
// GCC gave up vectorizing it.)
template <DinMode kMode>
void backward_row(float* __restrict dx, float* __restrict dw, float* __restrict db, const float* __restrict g,
                  const float* __restrict x, const float* __restrict weight, const float* __restrict r, int64_t C,
                  float m, float s, float dnorm_mean, float dnorm_norm_mean) {
  for (int64_t i = 0; i < C; ++i) {
    const float norm = (x[i] - m) * s;
    const float dy = g[i];
    db[i] += dy;
    dw[i] += norm * dy;
    const float d = (weight[i] * dy - dnorm_mean - norm * dnorm_norm_mean) * s;
    if constexpr (kMode == DinMode::overwrite) {
      dx[i] = d;
    } else if constexpr (kMode == DinMode::add) {
      dx[i] = d + r[i];
    } else {
      dx[i] = d + dx[i];
    }
  }
}

// layernorm_backward's rows; dresidual is read only in DinMode::add.
template <DinMode kMode>
void backward_rows(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                   const float* mean, const float* rstd, const float* dresidual, int64_t N, int64_t C,
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
    const float m = mean[n];
    const float s = rstd[n];
    // y = norm*w + b with norm = (x - m)*s. Through the normalization,
    // dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = w*dy.
    const float dnorm_mean = detail::lane_sum(C, [&](int64_t i) { return weight[i] * g[i]; }) * inv_c;
    const float dnorm_norm_mean =
        detail::lane_sum(C, [&](int64_t i) { return weight[i] * g[i] * ((x[i] - m) * s); }) * inv_c;
    const float* r = kMode == DinMode::add ? dresidual + n * C : nullptr;
    backward_row<kMode>(din + n * C, dweight, dbias, g, x, weight, r, C, m, s, dnorm_mean, dnorm_norm_mean);
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps) {
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) forward_row(out + n * C, mean + n, rstd + n, in + n * C, weight, bias, C, inv_c, eps);
}

void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        bool accumulate) {
  backward_rows<DinMode::overwrite>(din, dweight, dbias, dout, in, weight, mean, rstd, nullptr, N, C, accumulate);
}

void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* weight, const float* bias, int64_t N, int64_t C, float eps) {
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* ra = a + n * C;
    const float* rb = b + n * C;
    float* sum = sum_out + n * C;
    // add's element loop (sum may be ra or rb: each element is read before
    // it is written), then the row's LayerNorm reads the sum back from cache.
    for (int64_t i = 0; i < C; ++i) sum[i] = ra[i] + rb[i];
    forward_row(out + n * C, mean + n, rstd + n, sum, weight, bias, C, inv_c, eps);
  }
}

void layernorm_backward_add(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                            const float* weight, const float* mean, const float* rstd, const float* dresidual,
                            int64_t N, int64_t C, bool accumulate) {
  if (din == dresidual) {
    backward_rows<DinMode::add_in_place>(din, dweight, dbias, dout, in, weight, mean, rstd, nullptr, N, C, accumulate);
  } else {
    backward_rows<DinMode::add>(din, dweight, dbias, dout, in, weight, mean, rstd, dresidual, N, C, accumulate);
  }
}

}  // namespace shardtrain::cpu
