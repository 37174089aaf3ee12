// Helpers for the GPU tests: skip cleanly without a device, bring the device
// up, random inputs, relative error against the CPU reference, and one
// machine-readable line per comparison that scripts/gpu-check.sh gathers into
// its table:
//   GPUCHECK kernel=<name> dtype=<f32|tf32|bf16> relerr=<e> limit=<l> ok=<0|1>
#pragma once

#include "kernels/devices.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

namespace shardtrain::gpu_test {

// Tolerances the issue sets for GPU against CPU, by GEMM precision.
inline constexpr double kLimitF32 = 1e-5;
inline constexpr double kLimitTf32 = 1e-3;
inline constexpr double kLimitBf16 = 1e-2;

// In a test body: skip unless a CUDA device is usable, then bring up device 0.
#define ST_REQUIRE_GPU()                                                                                             \
  do {                                                                                                               \
    std::string st_why_;                                                                                             \
    if (::shardtrain::cuda_devices(&st_why_).empty()) GTEST_SKIP() << "skipped: no CUDA device (" << st_why_ << ")"; \
    ::shardtrain::use_cuda_device(0);                                                                                \
  } while (0)

inline Device gpu() { return Device::cuda(0); }

// Host tensor of uniform values in [lo, hi) from a fixed stream.
inline Tensor random_host(Shape shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  Rng rng(seed);
  for (float& x : t.f32_span()) x = lo + (hi - lo) * rng.uniform();
  return t;
}

inline Tensor to_host(const Tensor& t) { return to_device(t, Device::cpu()); }

// A device tensor whose bytes are all 0xFF (NaN as f32) so that an element a
// kernel fails to write shows up in the comparison.
inline Tensor poisoned(Shape shape, DType dtype = DType::f32) {
  Tensor host = Tensor::empty(shape, dtype);
  std::memset(host.raw(), 0xFF, host.nbytes());
  return to_device(host, gpu());
}

// ||got - want|| / ||want|| over f32 tensors (got may live on the GPU); NaN
// anywhere gives +inf.
inline double rel_error(const Tensor& got_any, const Tensor& want) {
  Tensor got = to_host(got_any);
  EXPECT_EQ(got.numel(), want.numel());
  double num = 0, den = 0;
  const float* g = got.f32();
  const float* w = want.f32();
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (!std::isfinite(g[i])) return INFINITY;
    const double d = double(g[i]) - double(w[i]);
    num += d * d;
    den += double(w[i]) * double(w[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double rel_error_scalar(double got, double want) {
  if (!std::isfinite(got)) return INFINITY;
  return want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
}

// Prints the GPUCHECK line and fails the test when relerr >= limit.
inline void report(const std::string& kernel, const char* dtype, double relerr, double limit) {
  const bool ok = relerr < limit;
  std::printf("GPUCHECK kernel=%s dtype=%s relerr=%.3e limit=%.0e ok=%d\n", kernel.c_str(), dtype, relerr, limit,
              ok ? 1 : 0);
  std::fflush(stdout);
  EXPECT_LT(relerr, limit) << kernel << " (" << dtype << ")";
}

}  // namespace shardtrain::gpu_test
