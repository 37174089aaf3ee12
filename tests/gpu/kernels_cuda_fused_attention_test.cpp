// cuDNN's fused attention (kernels/cuda/fused_attention.h) against the CPU's
// f32 attention, and the choice ops::attention_kernel makes between it and
// the materialized kernels. Outputs start poisoned (NaN) so that an element
// the kernel fails to write fails the comparison. Skips without a CUDA
// device; fails, with the reason, where cuDNN cannot run the shapes.
#include "tests/gpu/gpu_test_util.h"

#ifdef SHARDTRAIN_HAVE_CUDA

#include "kernels/cpu/attention.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/fused_attention.h"
#include "kernels/ops.h"

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

// Q, K, V, the probabilities and O are rounded to bf16 inside the kernel; the
// backward also rounds dO and its own products, so it gets twice the room.
constexpr double kForwardLimit = gpu_test::kLimitBf16;
constexpr double kBackwardLimit = 2 * gpu_test::kLimitBf16;

struct Restore {
  ~Restore() {
    cuda::set_gemm_precision(cuda::GemmPrecision::f32);
    cuda::set_attention_backend(cuda::AttentionBackend::cudnn);
  }
};

struct Dims {
  int64_t B, T, C, NH;
  std::string suffix;
};

// Head sizes 32, 16 and 64 (GPT-2's); a sequence length that is no multiple
// of cuDNN's tiles (40).
const std::vector<Dims> kShapes = {
    {4, 64, 128, 4, ""}, {2, 40, 128, 8, "_b2h8"}, {6, 48, 64, 2, "_b6h2"}, {2, 256, 768, 12, "_gpt2"}};

TEST(CudaFusedAttention, ForwardAndBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  Restore restore;
  uint64_t seed = 7001;
  for (const Dims& d : kShapes) {
    const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH;
    const std::string why = cuda::fused_attention_unavailable(B, T, C, NH);
    ASSERT_EQ(why, "") << "fused attention [" << B << ", " << T << ", " << C << "] in " << NH << " heads";
    const Tensor qkv = random_host({B, T, 3 * C}, seed++), dout = random_host({B, T, C}, seed++);
    Tensor out_ref = Tensor::empty({B, T, C}), att_ref = Tensor::empty({B, NH, T, T});
    cpu::attention_forward(out_ref.f32(), att_ref.f32(), qkv.f32(), B, T, C, NH);
    Tensor dqkv_ref = Tensor::empty({B, T, 3 * C});
    std::vector<float> scratch(size_t(T * T));
    cpu::attention_backward(dqkv_ref.f32(), scratch.data(), dout.f32(), qkv.f32(), att_ref.f32(), B, T, C, NH);

    const Tensor d_qkv = to_device(qkv, gpu()), d_dout = to_device(dout, gpu());
    const int64_t saved_bytes = int64_t(cuda::fused_attention_saved_bytes(B, T, C, NH));
    const Tensor saved = poisoned({(saved_bytes + 3) / 4});
    const Tensor out = poisoned({B, T, C}), dqkv = poisoned({B, T, 3 * C});
    cuda::fused_attention_forward(out.f32(), saved.f32(), d_qkv.f32(), B, T, C, NH);
    report("fused_attention_forward" + d.suffix, "bf16", rel_error(out, out_ref), kForwardLimit);
    cuda::fused_attention_backward(dqkv.f32(), d_dout.f32(), saved.f32(), nullptr, nullptr, B, T, C, NH);
    report("fused_attention_backward" + d.suffix, "bf16", rel_error(dqkv, dqkv_ref), kBackwardLimit);
    // What it saves instead of the B x NH x T x T probabilities.
    EXPECT_LT(saved_bytes, B * NH * T * T * 4 + 1024);
  }
}

// The same inputs twice: the same bits (no atomics in the order of a sum).
TEST(CudaFusedAttention, RepeatsBitForBit) {
  ST_REQUIRE_GPU();
  const Dims d = kShapes.back();
  const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH;
  ASSERT_EQ(cuda::fused_attention_unavailable(B, T, C, NH), "");
  const Tensor qkv = to_device(random_host({B, T, 3 * C}, 7101), gpu());
  const Tensor dout = to_device(random_host({B, T, C}, 7102), gpu());
  const Tensor saved = poisoned({int64_t(cuda::fused_attention_saved_bytes(B, T, C, NH) + 3) / 4});
  std::vector<Tensor> grads;
  for (int run = 0; run < 2; ++run) {
    const Tensor out = poisoned({B, T, C}), dqkv = poisoned({B, T, 3 * C});
    cuda::fused_attention_forward(out.f32(), saved.f32(), qkv.f32(), B, T, C, NH);
    cuda::fused_attention_backward(dqkv.f32(), dout.f32(), saved.f32(), nullptr, nullptr, B, T, C, NH);
    grads.push_back(gpu_test::to_host(dqkv));
  }
  EXPECT_EQ(std::memcmp(grads[0].raw(), grads[1].raw(), grads[0].nbytes()), 0);
}

// Mixed precision's bf16 qkv and O, read and written in place, against f32
// ones that go through the kernel's own bf16 copies: with qkv's values
// already bf16, both run the same cuDNN graphs on the same bits, so O and
// dQKV agree bit for bit; only the log-sum-exp rows are saved.
TEST(CudaFusedAttention, Bf16TensorsInPlaceGiveTheBitsOfTheCopies) {
  ST_REQUIRE_GPU();
  const Dims d = kShapes.back();
  const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH;
  ASSERT_EQ(cuda::fused_attention_unavailable(B, T, C, NH), "");
  const Tensor qkv16 = Tensor::empty({B, T, 3 * C}, DType::bf16, gpu()), qkv = poisoned({B, T, 3 * C});
  ops::convert(qkv16, to_device(random_host({B, T, 3 * C}, 7201), gpu()));
  ops::convert(qkv, qkv16);  // f32 values a bf16 holds exactly
  const Tensor dout = to_device(random_host({B, T, C}, 7202), gpu());

  const size_t copies_bytes = cuda::fused_attention_saved_bytes(B, T, C, NH);
  const size_t in_place_bytes = cuda::fused_attention_saved_bytes(B, T, C, NH, /*bf16_io=*/true);
  EXPECT_EQ(in_place_bytes, size_t(B * NH * T) * sizeof(float));
  EXPECT_GE(copies_bytes, in_place_bytes + size_t(B * T * 4 * C) * 2);  // equal where nothing is padded

  const Tensor saved = poisoned({int64_t(copies_bytes + 3) / 4});
  const Tensor out = poisoned({B, T, C}), dqkv = poisoned({B, T, 3 * C});
  cuda::fused_attention_forward(out.f32(), saved.f32(), qkv.f32(), B, T, C, NH);
  cuda::fused_attention_backward(dqkv.f32(), dout.f32(), saved.f32(), nullptr, nullptr, B, T, C, NH);

  const Tensor saved16 = poisoned({int64_t(in_place_bytes + 3) / 4});
  const Tensor out16 = poisoned({B, T, C}, DType::bf16), dqkv16 = poisoned({B, T, 3 * C}, DType::bf16);
  cuda::fused_attention_forward(out16.raw(), saved16.raw(), qkv16.raw(), B, T, C, NH, /*bf16_io=*/true);
  cuda::fused_attention_backward(dqkv16.raw(), dout.f32(), saved16.raw(), qkv16.raw(), out16.raw(), B, T, C, NH,
                                 /*bf16_io=*/true, /*dqkv_bf16=*/true);

  const Tensor out_wide = poisoned({B, T, C}), dqkv_wide = poisoned({B, T, 3 * C});
  ops::convert(out_wide, out16);
  ops::convert(dqkv_wide, dqkv16);
  const Tensor a = gpu_test::to_host(out), b = gpu_test::to_host(out_wide);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "O, rel. " << rel_error(out_wide, a);
  const Tensor da = gpu_test::to_host(dqkv), db = gpu_test::to_host(dqkv_wide);
  EXPECT_EQ(std::memcmp(da.raw(), db.raw(), da.nbytes()), 0) << "dQKV, rel. " << rel_error(dqkv_wide, da);
}

TEST(CudaFusedAttention, RunsOnlyWhereGemmsAreBf16AndCudnnIsChosen) {
  ST_REQUIRE_GPU();
  Restore restore;
  const Dims d = kShapes.front();
  const auto kernel = [&](Device device) { return ops::attention_kernel(device, d.B, d.T, d.C, d.NH); };
  cuda::set_gemm_precision(cuda::GemmPrecision::bf16);
  EXPECT_EQ(kernel(gpu()), ops::AttentionKernel::fused);
  EXPECT_EQ(kernel(Device::cpu()), ops::AttentionKernel::materialized);
  cuda::set_attention_backend(cuda::AttentionBackend::materialized);
  EXPECT_EQ(kernel(gpu()), ops::AttentionKernel::materialized);
  cuda::set_attention_backend(cuda::AttentionBackend::cudnn);
  for (const auto p : {cuda::GemmPrecision::f32, cuda::GemmPrecision::tf32}) {
    cuda::set_gemm_precision(p);
    EXPECT_EQ(kernel(gpu()), ops::AttentionKernel::materialized);
  }
  // A head size cuDNN does not take (12) falls back, with the reason.
  EXPECT_NE(cuda::fused_attention_unavailable(2, 16, 48, 4), "");
  cuda::set_gemm_precision(cuda::GemmPrecision::bf16);
  EXPECT_EQ(ops::attention_kernel(gpu(), 2, 16, 48, 4), ops::AttentionKernel::materialized);
}

}  // namespace
}  // namespace shardtrain

#else  // no CUDA backend in this build

TEST(CudaFusedAttention, NeedsTheCudaBackend) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }

#endif
