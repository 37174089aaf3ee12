#include "kernels/cpu/rmsnorm.h"

#include "kernels/cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace shardtrain::cpu {
namespace {

// The helpers' names carry rmsnorm_: the library is built as a unity build,
// where this file shares a translation unit (and an anonymous namespace) with
// other kernels.

// One row's forward. The fused residual variant calls the same function on
// the sum it has just written, so the two give the same bits by construction.
void rmsnorm_forward_row(float* o, float* rstd, const float* x, const float* weight, int64_t C, float inv_c,
                         float eps) {
  const float ms = detail::lane_sum(C, [&](int64_t i) { return x[i] * x[i]; }) * inv_c;
  const float s = 1.0f / std::sqrt(ms + eps);
  for (int64_t i = 0; i < C; ++i) o[i] = (x[i] * s) * weight[i];
  *rstd = s;
}

// What the backward row does with its input gradient d: store it, add the
// residual's gradient r (d + r[i], the order of add(din, din, dresidual)), or
// add what din already holds (din is dresidual itself: one pointer, so
// __restrict stays true).
enum class RmsDinMode { overwrite, add, add_in_place };

// The second pass of a row's backward: dweight and dx. (A function of its own
// with __restrict parameters, as layernorm's: inlined into the row loop, GCC
// may give up vectorizing it.)
template <RmsDinMode kMode>
void rmsnorm_backward_row(float* __restrict dx, float* __restrict dw, const float* __restrict g,
                          const float* __restrict x, const float* __restrict weight, const float* __restrict r,
                          int64_t C, float s, float dnorm_norm_mean) {
  for (int64_t i = 0; i < C; ++i) {
    const float norm = x[i] * s;
    const float dy = g[i];
    dw[i] += norm * dy;
    const float d = (weight[i] * dy - norm * dnorm_norm_mean) * s;
    if constexpr (kMode == RmsDinMode::overwrite) {
      dx[i] = d;
    } else if constexpr (kMode == RmsDinMode::add) {
      dx[i] = d + r[i];
    } else {
      dx[i] = d + dx[i];
    }
  }
}

// rmsnorm_backward's rows; dresidual is read only in RmsDinMode::add.
template <RmsDinMode kMode>
void rmsnorm_backward_rows(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                           const float* rstd, const float* dresidual, int64_t N, int64_t C, bool accumulate) {
  // dweight is a sum over rows: zeroing C floats first is negligible next to
  // the N*C row work and keeps the row loop uniform.
  if (!accumulate) std::fill(dweight, dweight + C, 0.0f);
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* x = in + n * C;
    const float* g = dout + n * C;
    const float s = rstd[n];
    // y = norm * w with norm = x * s, s = (mean(x^2) + eps)^(-1/2), so
    // ds/dx_i = -s^3 x_i / C and dx = s * (dnorm - norm * mean(dnorm * norm)),
    // dnorm = w * dy (layernorm's formula without the mean(dnorm) term).
    const float dnorm_norm_mean = detail::lane_sum(C, [&](int64_t i) { return weight[i] * g[i] * (x[i] * s); }) * inv_c;
    const float* r = kMode == RmsDinMode::add ? dresidual + n * C : nullptr;
    rmsnorm_backward_row<kMode>(din + n * C, dweight, g, x, weight, r, C, s, dnorm_norm_mean);
  }
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t N, int64_t C, float eps) {
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) rmsnorm_forward_row(out + n * C, rstd + n, in + n * C, weight, C, inv_c, eps);
}

void residual_rmsnorm_forward(float* sum_out, float* out, float* rstd, const float* a, const float* b,
                              const float* weight, int64_t N, int64_t C, float eps) {
  const float inv_c = 1.0f / float(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* ra = a + n * C;
    const float* rb = b + n * C;
    float* sum = sum_out + n * C;
    // add's element loop (sum may be ra or rb: each element is read before it
    // is written), then the row's RMSNorm reads the sum back from cache.
    for (int64_t i = 0; i < C; ++i) sum[i] = ra[i] + rb[i];
    rmsnorm_forward_row(out + n * C, rstd + n, sum, weight, C, inv_c, eps);
  }
}

void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                      const float* rstd, const float* dresidual, int64_t N, int64_t C, bool accumulate) {
  if (dresidual == nullptr) {
    rmsnorm_backward_rows<RmsDinMode::overwrite>(din, dweight, dout, in, weight, rstd, nullptr, N, C, accumulate);
  } else if (din == dresidual) {
    rmsnorm_backward_rows<RmsDinMode::add_in_place>(din, dweight, dout, in, weight, rstd, nullptr, N, C, accumulate);
  } else {
    rmsnorm_backward_rows<RmsDinMode::add>(din, dweight, dout, in, weight, rstd, dresidual, N, C, accumulate);
  }
}

}  // namespace shardtrain::cpu
