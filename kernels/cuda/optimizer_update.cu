#include "kernels/cuda/optimizer_update.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <charconv>
#include <cstdint>
#include <string>

namespace shardtrain::cuda {
namespace {

// The checks' messages are built from std::string (no fmt in CUDA sources,
// see context.h), with the CPU's text; a float prints in its shortest
// round-trip form, as fmt's "{}" does.
std::string shortest(float x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

constexpr int kThreads = 256;

// p = p - lr * (g + wd * p); step: SgdStep {lr, first}.
__global__ void sgd_plain_kernel(float* p, const float* g, int64_t n, const float* step, float wd) {
  const float lr = step[0];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float pi = p[i];
    const float d = __fadd_rn(g[i], __fmul_rn(wd, pi));
    p[i] = __fsub_rn(pi, __fmul_rn(lr, d));
  }
}

// As sgd_momentum in kernels/cpu/optimizer_update.cpp:
//   d = g + wd*p; b = first ? d : buf*momentum + keep*d; buf = b;
//   step = nesterov ? d + momentum*b : b; p = p - lr*step.
__global__ void sgd_momentum_kernel(float* p, const float* g, float* buf, int64_t n, const float* step, float wd,
                                    float momentum, float keep, bool nesterov) {
  const float lr = step[0];
  const bool first = step[1] != 0.0f;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float pi = p[i];
    const float d = __fadd_rn(g[i], __fmul_rn(wd, pi));
    const float b = first ? d : __fadd_rn(__fmul_rn(buf[i], momentum), __fmul_rn(keep, d));
    buf[i] = b;
    const float step = nesterov ? __fadd_rn(d, __fmul_rn(momentum, b)) : b;
    p[i] = __fsub_rn(pi, __fmul_rn(lr, step));
  }
}

// As adamw_update in kernels/cpu/optimizer_update.cpp:
//   m = m + w1*(g - m); v = v*beta2 + (w2*g)*g;
//   p = p*decay - (step_size*m) / (sqrt(v)/bc2_sqrt + eps);
// step: AdamWStep {decay, step_size, bc2_sqrt}.
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, const float* step, float w1,
                             float w2, float beta2, float eps) {
  const float decay = step[0], step_size = step[1], bc2_sqrt = step[2];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float gi = g[i];
    const float mi = __fadd_rn(m[i], __fmul_rn(w1, __fsub_rn(gi, m[i])));
    const float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(w2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
    p[i] = __fsub_rn(__fmul_rn(p[i], decay), __fdiv_rn(__fmul_rn(step_size, mi), denom));
  }
}

struct StoredFloats {
  float v[kMaxStoredFloats];
};

__global__ void store_floats_kernel(float* dst, StoredFloats values, int n) {
  if (int(threadIdx.x) < n) dst[threadIdx.x] = values.v[threadIdx.x];
}

}  // namespace

void store_floats(float* dst, const float* values, int n) {
  ST_CUDA_REQUIRE(n >= 0 && n <= kMaxStoredFloats,
                  "store_floats: " + std::to_string(n) + " values (at most " + std::to_string(kMaxStoredFloats) + ")");
  if (n == 0) return;
  StoredFloats v{};
  for (int i = 0; i < n; ++i) v.v[i] = values[i];
  store_floats_kernel<<<1, kMaxStoredFloats, 0, compute_stream()>>>(dst, v, n);
  ST_CUDA_CHECK_LAUNCH("store_floats_kernel");
}

void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const cpu::SgdParams& hp,
                const float* step) {
  const float wd = hp.weight_decay, mu = hp.momentum;
  if (mu == 0.0f) {
    if (n <= 0) return;
    sgd_plain_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(param, grad, n, step, wd);
    ST_CUDA_CHECK_LAUNCH("sgd_plain_kernel");
    return;
  }
  ST_CUDA_REQUIRE(momentum_buf != nullptr, "sgd_update: momentum " + shortest(mu) + " needs a momentum buffer");
  if (n <= 0) return;
  const float keep = float(1.0 - double(hp.dampening));
  sgd_momentum_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(param, grad, momentum_buf, n, step, wd,
                                                                                mu, keep, hp.nesterov);
  ST_CUDA_CHECK_LAUNCH("sgd_momentum_kernel");
}

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const cpu::AdamWParams& hp,
                  const float* step) {
  if (n <= 0) return;
  // The constants in double, rounded once to f32, exactly as the CPU.
  const double b1 = hp.beta1, b2 = hp.beta2;
  const float w1 = float(1.0 - b1), w2 = float(1.0 - b2), beta2 = hp.beta2, eps = hp.eps;
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(param, grad, m, v, n, step, w1, w2, beta2,
                                                                         eps);
  ST_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace shardtrain::cuda
