// The Llama block's GPU kernels of kernels/cuda (rmsnorm, rope, swiglu)
// against the CPU kernels of kernels/cpu on the same random inputs. Outputs
// are poisoned (NaN) before each call, so an element a kernel fails to write
// shows up as an infinite error. Every comparison prints one GPUCHECK line.
//
// Limits: f32 results within kLimitF32 (1e-5 relative norm). swiglu rounds
// every operation as the CPU does (same order, no FMA contraction, the CPU's
// exp polynomial): the same bits, checked as such. rope's only difference
// can be its cos/sin table (CUDA's double pow and sincos against glibc's, both
// within 2 ulp of double), which moves a float entry in rare cases; rmsnorm's
// row sums and dweight's column sums add in another fixed order (a few f32
// ulps). bf16 outputs must be the CPU's f32 result rounded once: bit for bit,
// except where that f32 result lies within kNearTie (relative, a few f32
// ulps: the f32 difference allowed above) of a bf16 rounding midpoint, where
// either neighbour is accepted.
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/devices.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/dtype.h"
#include "tests/gpu/gpu_test_util.h"

#if defined(SHARDTRAIN_HAVE_CUDA)
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace shardtrain {
namespace {

#if defined(SHARDTRAIN_HAVE_CUDA)

using gpu_test::gpu;
using gpu_test::kLimitBf16;
using gpu_test::kLimitF32;
using gpu_test::poisoned;
using gpu_test::random_host;
using gpu_test::rel_error;
using gpu_test::report;
using gpu_test::to_host;

constexpr float kEps = 1e-5f;
constexpr float kTheta = 10000.0f;
constexpr double kNearTie = 1e-6;

Tensor dev(const Tensor& host) { return to_device(host, gpu()); }

Tensor clone_host(const Tensor& host) {
  Tensor t = Tensor::empty(host.shape(), host.dtype());
  std::memcpy(t.raw(), host.raw(), host.nbytes());
  return t;
}

// f32 elements (the first tensor may live on the GPU) whose bits differ.
int64_t bit_mismatches(const Tensor& got_any, const Tensor& want_any) {
  const Tensor got = to_host(got_any), want = to_host(want_any);
  EXPECT_EQ(got.numel(), want.numel());
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) bad += std::memcmp(got.f32() + i, want.f32() + i, sizeof(float)) != 0;
  return bad;
}

// A host bf16 tensor of x's values rounded once (the CPU's mixed-precision
// stand-in for a bf16 input: exactly representable values).
Tensor rounded_bf16(const Tensor& x) {
  Tensor t = Tensor::empty(x.shape(), DType::bf16);
  for (int64_t i = 0; i < x.numel(); ++i) t.bf16_data()[i] = to_bf16(x.f32()[i]);
  return t;
}

// The host f32 tensor of a bf16 tensor's values (widened, exactly).
Tensor widened(const Tensor& h_any) {
  const Tensor h = to_host(h_any);
  Tensor t = Tensor::empty(h.shape());
  for (int64_t i = 0; i < h.numel(); ++i) t.f32()[i] = to_f32(h.bf16_data()[i]);
  return t;
}

// bf16 elements of `got` (on the GPU) that are not the CPU's f32 `want`
// rounded once, a value within kNearTie of a rounding midpoint accepting
// either neighbour. Prints the GPUCHECK line of the widened values too.
int64_t bf16_mismatches(const std::string& kernel, const Tensor& got_any, const Tensor& want) {
  const Tensor got = to_host(got_any);
  EXPECT_EQ(got.dtype(), DType::bf16);
  EXPECT_EQ(got.numel(), want.numel());
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float w = want.f32()[i];
    const uint16_t g = got.bf16_data()[i].bits;
    const float slack = float(kNearTie * std::fabs(w));
    const bool ok = g == to_bf16(w).bits || g == to_bf16(w - slack).bits || g == to_bf16(w + slack).bits;
    bad += ok ? 0 : 1;
  }
  report(kernel, "bf16", rel_error(widened(got), want), kLimitBf16);
  return bad;
}

// ---- rmsnorm ----------------------------------------------------------------

// Two shapes: rows a multiple of dweight's row chunks and channels of its
// column blocks, and neither.
constexpr std::pair<int64_t, int64_t> kNormShapes[] = {{512, 768}, {1000, 100}};

TEST(CudaRmsNorm, ForwardMatchesCpuInF32AndBf16) {
  ST_REQUIRE_GPU();
  for (const auto& [N, C] : kNormShapes) {
    const Tensor x = random_host({N, C}, 2001, -2.0f, 3.0f);
    const Tensor w = random_host({C}, 2002, 0.5f, 1.5f);
    const Tensor dx = dev(x), dw = dev(w);
    const Tensor wout = Tensor::empty({N, C}), wrstd = Tensor::empty({N});
    cpu::rmsnorm_forward(wout.f32(), wrstd.f32(), x.f32(), w.f32(), N, C, kEps);
    const Tensor out = poisoned({N, C}), rstd = poisoned({N});
    cuda::rmsnorm_forward(out.f32(), rstd.f32(), dx.f32(), dw.f32(), N, C, kEps);
    report("rmsnorm_forward", "f32", rel_error(out, wout), kLimitF32);
    report("rmsnorm_forward.rstd", "f32", rel_error(rstd, wrstd), kLimitF32);
    const Tensor out16 = poisoned({N, C}, DType::bf16), rstd16 = poisoned({N});
    cuda::rmsnorm_forward(out16.raw(), true, rstd16.f32(), dx.f32(), dw.f32(), N, C, kEps);
    EXPECT_EQ(bf16_mismatches("rmsnorm_forward", out16, wout), 0) << N << "x" << C;
    EXPECT_EQ(bit_mismatches(rstd16, rstd), 0) << "rstd does not depend on the output's type";
    // Deterministic: the same bits on a second call.
    const Tensor again = poisoned({N, C});
    cuda::rmsnorm_forward(again.f32(), rstd.f32(), dx.f32(), dw.f32(), N, C, kEps);
    EXPECT_EQ(bit_mismatches(again, out), 0);
  }
}

// The fused kernel against the CPU's, and against the unfused CUDA sequence
// it replaces (cuda::add, then rmsnorm_forward): the same bits. The sum
// written separately or in place over either operand.
TEST(CudaRmsNorm, ResidualForwardMatchesCpuAndTheUnfusedBits) {
  ST_REQUIRE_GPU();
  for (const auto& [N, C] : kNormShapes) {
    const Tensor a = random_host({N, C}, 2011, -2.0f, 3.0f), b = random_host({N, C}, 2012, 1.0f, 2.0f);
    const Tensor w = random_host({C}, 2013, 0.5f, 1.5f);
    const Tensor da = dev(a), db = dev(b), dw = dev(w);
    const Tensor wsum = Tensor::empty({N, C}), wout = Tensor::empty({N, C}), wrstd = Tensor::empty({N});
    cpu::residual_rmsnorm_forward(wsum.f32(), wout.f32(), wrstd.f32(), a.f32(), b.f32(), w.f32(), N, C, kEps);
    const Tensor usum = poisoned({N, C}), uout = poisoned({N, C}), urstd = poisoned({N});
    cuda::add(usum.f32(), da.f32(), db.f32(), N * C);
    cuda::rmsnorm_forward(uout.f32(), urstd.f32(), usum.f32(), dw.f32(), N, C, kEps);
    for (const int alias : {0, 1, 2}) {  // sum separate, over a, over b
      for (const bool bf16_out : {false, true}) {
        const Tensor sum = alias == 1 ? dev(a) : alias == 2 ? dev(b) : poisoned({N, C});
        const Tensor out = poisoned({N, C}, bf16_out ? DType::bf16 : DType::f32), rstd = poisoned({N});
        cuda::residual_rmsnorm_forward(sum.f32(), out.raw(), bf16_out, rstd.f32(), alias == 1 ? sum.f32() : da.f32(),
                                       alias == 2 ? sum.f32() : db.f32(), dw.f32(), N, C, kEps);
        const std::string what = std::to_string(N) + "x" + std::to_string(C) + " alias " + std::to_string(alias);
        report("residual_rmsnorm_forward.sum", "f32", rel_error(sum, wsum), kLimitF32);
        report("residual_rmsnorm_forward.rstd", "f32", rel_error(rstd, wrstd), kLimitF32);
        EXPECT_EQ(bit_mismatches(sum, usum), 0) << what;
        EXPECT_EQ(bit_mismatches(rstd, urstd), 0) << what;
        if (bf16_out) {
          EXPECT_EQ(bf16_mismatches("residual_rmsnorm_forward", out, wout), 0) << what;
        } else {
          report("residual_rmsnorm_forward", "f32", rel_error(out, wout), kLimitF32);
          EXPECT_EQ(bit_mismatches(out, uout), 0) << what;
        }
      }
    }
  }
}

// Overwriting and accumulating; without dresidual, with it, and with din
// written over it (then the bits of the backward followed by cuda::add).
TEST(CudaRmsNorm, BackwardMatchesCpuAndTheUnfusedBits) {
  ST_REQUIRE_GPU();
  for (const auto& [N, C] : kNormShapes) {
    const Tensor x = random_host({N, C}, 2021, -2.0f, 3.0f);
    const Tensor w = random_host({C}, 2022, 0.5f, 1.5f);
    const Tensor g = random_host({N, C}, 2023), r = random_host({N, C}, 2024);
    // rstd from the CPU forward, used by both backward passes.
    const Tensor y = Tensor::empty({N, C}), rstd = Tensor::empty({N});
    cpu::rmsnorm_forward(y.f32(), rstd.f32(), x.f32(), w.f32(), N, C, kEps);
    const Tensor dx = dev(x), dw_in = dev(w), dg = dev(g), dr = dev(r), drstd = dev(rstd);
    for (const bool accumulate : {false, true}) {
      const Tensor dw0 = random_host({C}, accumulate ? 2030 : 2040);
      // The unfused CUDA sequence, for the residual's bits.
      const Tensor udin = poisoned({N, C}), udw = accumulate ? dev(dw0) : poisoned({C});
      cuda::rmsnorm_backward(udin.f32(), udw.f32(), dg.f32(), dx.f32(), dw_in.f32(), drstd.f32(), nullptr, N, C,
                             accumulate);
      const Tensor uadd = poisoned({N, C});
      cuda::add(uadd.f32(), udin.f32(), dr.f32(), N * C);
      for (const int mode : {0, 1, 2}) {  // no residual, residual separate, din over the residual
        const Tensor wdin = Tensor::empty({N, C}), wdw = clone_host(dw0);
        cpu::rmsnorm_backward(wdin.f32(), wdw.f32(), g.f32(), x.f32(), w.f32(), rstd.f32(),
                              mode == 0 ? nullptr : r.f32(), N, C, accumulate);
        const Tensor din = mode == 2 ? dev(r) : poisoned({N, C});
        const Tensor dweight = accumulate ? dev(dw0) : poisoned({C});
        const float* residual = mode == 0 ? nullptr : mode == 1 ? dr.f32() : din.f32();
        cuda::rmsnorm_backward(din.f32(), dweight.f32(), dg.f32(), dx.f32(), dw_in.f32(), drstd.f32(), residual, N, C,
                               accumulate);
        const std::string what = std::to_string(N) + "x" + std::to_string(C) + " mode " + std::to_string(mode) +
                                 " accumulate " + std::to_string(accumulate);
        report("rmsnorm_backward.din", "f32", rel_error(din, wdin), kLimitF32);
        report("rmsnorm_backward.dweight", "f32", rel_error(dweight, wdw), kLimitF32);
        EXPECT_EQ(bit_mismatches(din, mode == 0 ? udin : uadd), 0) << what;
        EXPECT_EQ(bit_mismatches(dweight, udw), 0) << what;
      }
    }
  }
}

// ---- rope -------------------------------------------------------------------

// A grouped-query qkv row: 8 query heads, 2 key heads, 2 value heads of 64,
// and 5 columns past them (none of which may change).
struct RopeShape {
  int64_t B = 4, T = 256, H = 8, KV = 2, hs = 64, extra = 5;
  int64_t n_heads() const { return H + KV; }
  int64_t row() const { return (H + 2 * KV) * hs + extra; }
};

TEST(CudaRope, ForwardAndBackwardMatchCpuInF32AndBf16) {
  ST_REQUIRE_GPU();
  const RopeShape s;
  const Tensor x = random_host({s.B * s.T, s.row()}, 2101, -2.0f, 2.0f);
  // bf16 inputs: the CPU rotates the widened values, in f32.
  const Tensor x16 = rounded_bf16(x), xw = widened(x16);
  for (const bool forward : {true, false}) {
    const char* name = forward ? "rope_forward" : "rope_backward";
    auto cpu_rope = [&](const Tensor& t) {
      (forward ? cpu::rope_forward : cpu::rope_backward)(t.f32(), s.B, s.T, s.row(), s.n_heads(), s.hs, kTheta);
    };
    const Tensor want = clone_host(x), want16 = clone_host(xw);
    cpu_rope(want);
    cpu_rope(want16);
    const Tensor got = dev(x), got16 = dev(x16);
    if (forward) {
      cuda::rope_forward(got.f32(), s.B, s.T, s.row(), s.n_heads(), s.hs, kTheta);
      cuda::rope_forward(got16.raw(), true, s.B, s.T, s.row(), s.n_heads(), s.hs, kTheta);
    } else {
      cuda::rope_backward(got.f32(), s.B, s.T, s.row(), s.n_heads(), s.hs, kTheta);
      cuda::rope_backward(got16.raw(), true, s.B, s.T, s.row(), s.n_heads(), s.hs, kTheta);
    }
    report(name, "f32", rel_error(got, want), kLimitF32);
    const int64_t differ = bit_mismatches(got, want);
    std::printf("%s: %lld of %lld f32 elements differ from the CPU's bits (cos/sin table)\n", name, (long long)differ,
                (long long)want.numel());
    EXPECT_EQ(bf16_mismatches(name, got16, want16), 0);
    // Columns past the rotated heads: untouched, to the bit.
    const Tensor h = to_host(got);
    int64_t touched = 0;
    for (int64_t r = 0; r < s.B * s.T; ++r)
      for (int64_t c = s.n_heads() * s.hs; c < s.row(); ++c) {
        const int64_t k = r * s.row() + c;
        touched += std::memcmp(h.f32() + k, x.f32() + k, sizeof(float)) != 0;
      }
    EXPECT_EQ(touched, 0) << name;
  }
}

// ---- swiglu -----------------------------------------------------------------

TEST(CudaSwiGlu, ForwardAndBackwardAreTheCpuBitsInF32AndBf16) {
  ST_REQUIRE_GPU();
  const int64_t N = 1000, F = 688;  // N*F not a multiple of the block size
  Tensor gu = random_host({N, 2 * F}, 2201, -12.0f, 12.0f);
  gu.f32()[0] = 1e30f;  // far past exp's range on both sides
  gu.f32()[1] = -1e30f;
  const Tensor dh = random_host({N, F}, 2202);
  // f32 throughout: the CPU's bits.
  const Tensor wh = Tensor::empty({N, F}), wdgu = Tensor::empty({N, 2 * F});
  cpu::swiglu_forward(wh.f32(), gu.f32(), N, F);
  cpu::swiglu_backward(wdgu.f32(), dh.f32(), gu.f32(), N, F);
  const Tensor dgu_in = dev(gu), ddh = dev(dh);
  const Tensor h = poisoned({N, F}), dgu = poisoned({N, 2 * F});
  cuda::swiglu_forward(h.f32(), dgu_in.f32(), N, F);
  cuda::swiglu_backward(dgu.f32(), ddh.f32(), dgu_in.f32(), N, F);
  report("swiglu_forward", "f32", rel_error(h, wh), kLimitF32);
  report("swiglu_backward", "f32", rel_error(dgu, wdgu), kLimitF32);
  EXPECT_EQ(bit_mismatches(h, wh), 0);
  EXPECT_EQ(bit_mismatches(dgu, wdgu), 0);

  // Mixed precision: gu, dh bf16 in; h, dgu bf16 out. The CPU's reference runs
  // on the widened inputs, in f32; each output rounded once.
  const Tensor gu16 = rounded_bf16(gu), dh16 = rounded_bf16(dh);
  const Tensor guw = widened(gu16), dhw = widened(dh16);
  const Tensor wh16 = Tensor::empty({N, F}), wdgu16 = Tensor::empty({N, 2 * F});
  cpu::swiglu_forward(wh16.f32(), guw.f32(), N, F);
  cpu::swiglu_backward(wdgu16.f32(), dhw.f32(), guw.f32(), N, F);
  const Tensor dgu16_in = dev(gu16), ddh16 = dev(dh16);
  const Tensor h16 = poisoned({N, F}, DType::bf16), dgu16 = poisoned({N, 2 * F}, DType::bf16);
  cuda::swiglu_forward(h16.raw(), true, dgu16_in.raw(), true, N, F);
  cuda::swiglu_backward(dgu16.raw(), true, ddh16.raw(), true, dgu16_in.raw(), true, N, F);
  EXPECT_EQ(bf16_mismatches("swiglu_forward", h16, wh16), 0);
  EXPECT_EQ(bf16_mismatches("swiglu_backward", dgu16, wdgu16), 0);
  // Mixed in and out types: bf16 gu with f32 h and dgu (f32 dh).
  const Tensor hf = poisoned({N, F}), dguf = poisoned({N, 2 * F});
  cuda::swiglu_forward(hf.raw(), false, dgu16_in.raw(), true, N, F);
  const Tensor wdgu_mixed = Tensor::empty({N, 2 * F});
  cpu::swiglu_backward(wdgu_mixed.f32(), dh.f32(), guw.f32(), N, F);
  cuda::swiglu_backward(dguf.raw(), false, ddh.raw(), false, dgu16_in.raw(), true, N, F);
  EXPECT_EQ(bit_mismatches(hf, wh16), 0);
  EXPECT_EQ(bit_mismatches(dguf, wdgu_mixed), 0);
}

#else

TEST(CudaKernels, NotBuilt) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }

#endif

}  // namespace
}  // namespace shardtrain
