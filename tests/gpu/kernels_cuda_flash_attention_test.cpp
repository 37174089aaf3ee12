// The tiled CUDA attention (kernels/cuda/flash_attention.h) against the CPU's
// tiled attention (kernels/cpu/flash_attention.h) on the same random inputs:
// f32 tensors within kF32Limit, mixed precision's bf16 qkv, output and qkv
// gradient within bf16's limit, the same bits run after run. Outputs and the
// scratch start poisoned (NaN) so that an element the kernels fail to write
// fails the comparison. Every comparison prints one GPUCHECK line. Skips
// without a CUDA device.
#include "tests/gpu/gpu_test_util.h"

#ifdef SHARDTRAIN_HAVE_CUDA

#include "kernels/cpu/flash_attention.h"
#include "kernels/cuda/flash_attention.h"
#include "runtime/core/dtype.h"
#include "runtime/core/error.h"

#include <cstring>
#include <string>
#include <vector>

namespace shardtrain {
namespace {

using gpu_test::gpu;
using gpu_test::poisoned;
using gpu_test::random_host;
using gpu_test::rel_error;
using gpu_test::report;
using gpu_test::to_host;

// Both sides compute in f32 with sums in different orders (the CPU's GEMMs
// against the GPU's per-row dot products): far below this.
constexpr double kF32Limit = 1e-4;

struct Dims {
  int64_t B, T, H, KV, hs;
  int64_t C3() const { return (H + 2 * KV) * hs; }
  std::string name() const {
    return "_b" + std::to_string(B) + "t" + std::to_string(T) + "h" + std::to_string(H) + "kv" + std::to_string(KV) +
           "hs" + std::to_string(hs);
  }
};

// Grouped-query heads (H = 4 over KV = 1, 2 and 4); sequence lengths below
// one tile (7), no multiple of the kernels' tiles of 32 and 64 rows (100,
// 203) and exactly two forward tiles (128); head sizes 64 and 128, and 48,
// below the width of the kernel it runs in.
const std::vector<Dims> kShapes = {{2, 100, 4, 1, 64}, {1, 203, 4, 2, 128}, {2, 128, 4, 4, 64},
                                   {1, 7, 4, 2, 128},  {1, 203, 4, 4, 128}, {2, 77, 4, 2, 48}};

// What the CPU computes, in f32.
struct Reference {
  Tensor out, lse, dqkv;
};

// out_for_backward: the forward's output as the backward reads it (the CPU's
// own, or its values rounded to bf16 where the GPU's output is bf16).
Tensor cpu_backward(const Dims& d, const Tensor& dout, const Tensor& qkv, const Tensor& out_for_backward,
                    const Tensor& lse) {
  Tensor dqkv = Tensor::empty({d.B, d.T, d.C3()});
  std::vector<float> scratch(size_t(cpu::flash_attention_scratch_floats(d.T, d.hs)));
  cpu::flash_attention_backward(dqkv.f32(), scratch.data(), dout.f32(), qkv.f32(), out_for_backward.f32(), lse.f32(),
                                d.B, d.T, d.H, d.KV, d.hs);
  return dqkv;
}

Reference cpu_reference(const Dims& d, const Tensor& qkv, const Tensor& dout) {
  Reference r{Tensor::empty({d.B, d.T, d.H * d.hs}), Tensor::empty({d.B, d.H, d.T}), Tensor()};
  cpu::flash_attention_forward(r.out.f32(), r.lse.f32(), qkv.f32(), d.B, d.T, d.H, d.KV, d.hs);
  r.dqkv = cpu_backward(d, dout, qkv, r.out, r.lse);
  return r;
}

// A host bf16 tensor of x's values rounded once, and its values widened back.
Tensor rounded_bf16(const Tensor& x) {
  Tensor t = Tensor::empty(x.shape(), DType::bf16);
  for (int64_t i = 0; i < x.numel(); ++i) t.bf16_data()[i] = to_bf16(x.f32()[i]);
  return t;
}

Tensor widened(const Tensor& any) {
  const Tensor h = to_host(any);
  Tensor t = Tensor::empty(h.shape());
  for (int64_t i = 0; i < h.numel(); ++i) t.f32()[i] = to_f32(h.bf16_data()[i]);
  return t;
}

bool same_bits(const Tensor& a_any, const Tensor& b_any) {
  const Tensor a = to_host(a_any), b = to_host(b_any);
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The GPU's results of one forward and backward; every buffer poisoned first.
struct GpuRun {
  Tensor out, lse, dqkv;
};

GpuRun run_gpu(const Dims& d, const Tensor& qkv_dev, const Tensor& dout_dev, bool bf16_io) {
  const DType io = bf16_io ? DType::bf16 : DType::f32;
  GpuRun r{poisoned({d.B, d.T, d.H * d.hs}, io), poisoned({d.B, d.H, d.T}), poisoned({d.B, d.T, d.C3()}, io)};
  const Tensor scratch = poisoned({cuda::flash_attention_scratch_floats(d.T, d.hs, d.B, d.H)});
  cuda::flash_attention_forward(r.out.raw(), bf16_io, r.lse.f32(), qkv_dev.raw(), bf16_io, d.B, d.T, d.H, d.KV, d.hs);
  cuda::flash_attention_backward(r.dqkv.raw(), bf16_io, scratch.f32(), dout_dev.f32(), qkv_dev.raw(), bf16_io,
                                 r.out.raw(), bf16_io, r.lse.f32(), d.B, d.T, d.H, d.KV, d.hs);
  return r;
}

TEST(CudaFlashAttention, F32MatchesTheCpu) {
  ST_REQUIRE_GPU();
  uint64_t seed = 8101;
  for (const Dims& d : kShapes) {
    const Tensor qkv = random_host({d.B, d.T, d.C3()}, seed++), dout = random_host({d.B, d.T, d.H * d.hs}, seed++);
    const Reference ref = cpu_reference(d, qkv, dout);
    const GpuRun got = run_gpu(d, to_device(qkv, gpu()), to_device(dout, gpu()), false);
    report("flash_attention_forward" + d.name(), "f32", rel_error(got.out, ref.out), kF32Limit);
    report("flash_attention_lse" + d.name(), "f32", rel_error(got.lse, ref.lse), kF32Limit);
    report("flash_attention_backward" + d.name(), "f32", rel_error(got.dqkv, ref.dqkv), kF32Limit);
  }
}

// The f32 overload is the void* one with f32 tensors.
TEST(CudaFlashAttention, F32OverloadGivesTheSameBits) {
  ST_REQUIRE_GPU();
  const Dims d = kShapes.front();
  const Tensor qkv = to_device(random_host({d.B, d.T, d.C3()}, 8201), gpu());
  const Tensor out = poisoned({d.B, d.T, d.H * d.hs}), lse = poisoned({d.B, d.H, d.T});
  const Tensor out2 = poisoned({d.B, d.T, d.H * d.hs}), lse2 = poisoned({d.B, d.H, d.T});
  cuda::flash_attention_forward(out.f32(), lse.f32(), qkv.f32(), d.B, d.T, d.H, d.KV, d.hs);
  cuda::flash_attention_forward(out2.raw(), false, lse2.f32(), qkv.raw(), false, d.B, d.T, d.H, d.KV, d.hs);
  EXPECT_TRUE(same_bits(out, out2));
  EXPECT_TRUE(same_bits(lse, lse2));
}

// bf16 qkv, output and qkv gradient (dO and lse stay f32): against the CPU in
// f32 on qkv's bf16 values, its backward reading the output rounded to bf16
// as the GPU's does. The outputs differ by their one rounding to bf16.
TEST(CudaFlashAttention, Bf16TensorsMatchTheCpu) {
  ST_REQUIRE_GPU();
  uint64_t seed = 8301;
  for (const Dims& d : kShapes) {
    const Tensor qkv16 = rounded_bf16(random_host({d.B, d.T, d.C3()}, seed++));
    const Tensor qkv = widened(qkv16), dout = random_host({d.B, d.T, d.H * d.hs}, seed++);
    Reference ref = cpu_reference(d, qkv, dout);
    ref.dqkv = cpu_backward(d, dout, qkv, widened(rounded_bf16(ref.out)), ref.lse);
    const GpuRun got = run_gpu(d, to_device(qkv16, gpu()), to_device(dout, gpu()), true);
    report("flash_attention_forward" + d.name(), "bf16", rel_error(widened(got.out), ref.out), gpu_test::kLimitBf16);
    report("flash_attention_lse" + d.name(), "bf16", rel_error(got.lse, ref.lse), kF32Limit);
    report("flash_attention_backward" + d.name(), "bf16", rel_error(widened(got.dqkv), ref.dqkv), gpu_test::kLimitBf16);
  }
}

// The same inputs twice: the same bits (every sum in a fixed order, no atomics).
TEST(CudaFlashAttention, RepeatsBitForBit) {
  ST_REQUIRE_GPU();
  const Dims d{2, 203, 4, 2, 128};
  for (const bool bf16_io : {false, true}) {
    const Tensor qkv_host = random_host({d.B, d.T, d.C3()}, 8401);
    const Tensor qkv = to_device(bf16_io ? rounded_bf16(qkv_host) : qkv_host, gpu());
    const Tensor dout = to_device(random_host({d.B, d.T, d.H * d.hs}, 8402), gpu());
    const GpuRun a = run_gpu(d, qkv, dout, bf16_io), b = run_gpu(d, qkv, dout, bf16_io);
    EXPECT_TRUE(same_bits(a.out, b.out)) << (bf16_io ? "bf16" : "f32");
    EXPECT_TRUE(same_bits(a.lse, b.lse)) << (bf16_io ? "bf16" : "f32");
    EXPECT_TRUE(same_bits(a.dqkv, b.dqkv)) << (bf16_io ? "bf16" : "f32");
  }
}

// Checked before anything runs on the device: no GPU needed.
TEST(CudaFlashAttention, RejectsWhatItCannotRun) {
  const auto forward = [](int64_t T, int64_t H, int64_t KV, int64_t hs) {
    cuda::flash_attention_forward(nullptr, nullptr, nullptr, 1, T, H, KV, hs);
  };
  EXPECT_THROW(forward(16, 4, 2, 129), Error);  // head size above 128
  EXPECT_THROW(forward(16, 4, 3, 64), Error);   // heads that do not group
  EXPECT_THROW(forward(0, 4, 2, 64), Error);
  EXPECT_THROW(cuda::flash_attention_backward(nullptr, false, nullptr, nullptr, nullptr, false, nullptr, false, nullptr,
                                              1, 16, 4, 2, 256),
               Error);
  EXPECT_THROW(cuda::flash_attention_scratch_floats(0, 64, 1, 4), Error);
  // The backward's workspace grows as T, not T^2.
  EXPECT_EQ(cuda::flash_attention_scratch_floats(4096, 64, 2, 8),
            4 * cuda::flash_attention_scratch_floats(1024, 64, 2, 8));
}

}  // namespace
}  // namespace shardtrain

#else  // no CUDA backend in this build

TEST(CudaFlashAttention, NeedsTheCudaBackend) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }

#endif
