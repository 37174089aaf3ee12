// Helpers shared by the kernels_*_test.cpp files: deterministic random data,
// the scalar objective L = sum(out * R) accumulated in double, and a
// central-difference gradient check.
#pragma once

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardtrain::testing {

// Sets the CPU backend for a scope (kernels/cpu/cpu_backend.h); the one
// before comes back at the end.
class ScopedCpuBackend {
 public:
  explicit ScopedCpuBackend(cpu::CpuBackend b) : before_(cpu::cpu_backend()) { cpu::set_cpu_backend(b); }
  ~ScopedCpuBackend() { cpu::set_cpu_backend(before_); }
  ScopedCpuBackend(const ScopedCpuBackend&) = delete;
  ScopedCpuBackend& operator=(const ScopedCpuBackend&) = delete;

 private:
  cpu::CpuBackend before_;
};
// The process's product precision bf16 for a scope (kernels/cpu/gemm.h),
// f32 again at its end.
class ScopedBf16Products {
 public:
  ScopedBf16Products() { cpu::set_gemm_precision(cpu::GemmPrecision::bf16); }
  ~ScopedBf16Products() { cpu::set_gemm_precision(cpu::GemmPrecision::f32); }
  ScopedBf16Products(const ScopedBf16Products&) = delete;
  ScopedBf16Products& operator=(const ScopedBf16Products&) = delete;
};
// Both libraries a product or convolution can run on, for tests that hold
// each to the same reference.
inline constexpr cpu::CpuBackend kCpuBackends[] = {cpu::CpuBackend::openblas, cpu::CpuBackend::onednn};

// The message of the Error f() throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline std::vector<float> uniform_vector(size_t n, uint64_t key, float lo = -1.0f, float hi = 1.0f) {
  Rng rng(key);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Uniform magnitudes in [lo, hi] with random signs: keeps values away from 0
// (the ReLU kink) without biasing them.
inline std::vector<float> away_from_zero(size_t n, uint64_t key, float lo, float hi) {
  Rng rng(key);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi) * (rng.below(2) ? 1.0f : -1.0f);
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Checks grad = dL/dx by central differences: L(x + h e_i) - L(x - h e_i) over
// the step actually taken in float. x is restored after each probe. An entry
// passes when |numeric - analytic| <= rtol * (|analytic| + 0.1 * max|grad|):
// relative for large entries, with a floor for entries near zero.
inline void expect_gradient(std::vector<float>& x, const std::vector<float>& grad, const std::function<double()>& loss,
                            float h, double rtol, const std::string& what) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  double scale = 0.0;
  for (float g : grad) scale = std::max(scale, double(std::fabs(g)));
  ASSERT_GT(scale, 0.0) << what << ": the analytic gradient is all zero";
  int failures = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = x[i], loss_up = loss();
    x[i] = saved - h;
    const double down = x[i], loss_down = loss();
    x[i] = saved;
    const double numeric = (loss_up - loss_down) / (up - down);
    const double tol = rtol * (std::fabs(double(grad[i])) + 0.1 * scale);
    if (std::fabs(numeric - double(grad[i])) > tol && ++failures <= 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << grad[i] << ", numeric " << numeric;
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << x.size() << " entries differ";
}

}  // namespace shardtrain::testing
