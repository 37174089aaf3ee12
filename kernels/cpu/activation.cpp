#include "kernels/cpu/activation.h"

#include "kernels/cpu/vec_math.h"

namespace shardtrain::cpu {

// No __restrict here: the headers allow out == in and din == dout. Every
// element is read before its own slot is written, and GCC's overlap check
// accepts exact aliasing, so these loops vectorize either way.

void relu_forward(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void relu_backward(float* din, const float* dout, const float* out, int64_t n) {
  // dout is loaded unconditionally: a load under the condition would keep
  // GCC from turning the select into a vector blend.
  for (int64_t i = 0; i < n; ++i) {
    const float g = dout[i];
    din[i] = out[i] > 0.0f ? g : 0.0f;
  }
}

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

// Compute-bound (an exponential and a division per element): the widest
// vectors the CPU has.
ST_VECTOR_CLONES void gelu_forward(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    float sech2;
    out[i] = x * detail::sigmoid_2u(u, &sech2);  // x (1 + tanh u) / 2
  }
}

ST_VECTOR_CLONES void gelu_backward(float* din, const float* dout, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    float sech2;
    const float s = detail::sigmoid_2u(u, &sech2);
    // d/dx [x (1 + tanh u)/2] = (1 + tanh u)/2 + x/2 sech^2(u) du/dx
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    // Past |x| ~ 5e19 du is infinite where sech^2 is 0: the term is 0, not
    // NaN. detail::select, not `?:`: GCC turns a float `?:` into a branch
    // and then leaves the whole loop scalar in every clone (the same bits
    // either way).
    const float term = detail::select(sech2 > 0.0f, 0.5f * x * sech2 * du, 0.0f);
    din[i] = (s + term) * dout[i];
  }
}

}  // namespace shardtrain::cpu
