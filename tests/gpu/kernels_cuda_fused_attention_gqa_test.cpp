// cuDNN's fused attention with grouped-query heads (NKV key/value heads
// shared by NH query heads, kernels/cuda/fused_attention.h) against the
// CPU's tiled kernel, which takes the same qkv layout
// (kernels/cpu/flash_attention.h).
// Outputs start poisoned (NaN) so that an element the kernel fails to write
// fails the comparison. Skips without a CUDA device; fails, with the reason,
// where cuDNN cannot run the shapes.
#include "tests/gpu/gpu_test_util.h"

#ifdef SHARDTRAIN_HAVE_CUDA

#include "kernels/cpu/flash_attention.h"
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

// As kernels_cuda_fused_attention_test.cpp: bf16 inside the kernel, and
// twice the room for the backward's extra roundings.
constexpr double kForwardLimit = gpu_test::kLimitBf16;
constexpr double kBackwardLimit = 2 * gpu_test::kLimitBf16;

struct GqaDims {
  int64_t B, T, C, NH, NKV;
  std::string suffix;
  int64_t hs() const { return C / NH; }
  int64_t row() const { return C + 2 * NKV * hs(); }  // qkv's channels per token
};

// Groups of 4 and 2, multi-query (one key/value head), and NKV = NH given
// explicitly; two shapes that differ only in NKV (the graph cache must keep
// them apart); a sequence length that is no multiple of cuDNN's tiles (40);
// head sizes 32 and 64.
const std::vector<GqaDims> kShapes = {{2, 64, 256, 8, 2, "_h8kv2"},
                                      {2, 64, 256, 8, 4, "_h8kv4"},
                                      {2, 40, 256, 4, 1, "_mqa"},
                                      {3, 48, 128, 4, 4, "_kv_eq_h"},
                                      {1, 128, 1024, 16, 4, "_llama"}};

// Columns [from, to) of a host tensor [B, T, width] as [B, T, to - from].
Tensor columns(const Tensor& t, int64_t from, int64_t to) {
  const int64_t width = t.dim(2), rows = t.numel() / width;
  Tensor out = Tensor::empty({t.dim(0), t.dim(1), to - from});
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.f32() + r * (to - from), t.f32() + r * width + from, size_t(to - from) * sizeof(float));
  return out;
}

TEST(CudaFusedAttentionGqa, ForwardAndBackwardMatchCpuFlashAttention) {
  ST_REQUIRE_GPU();
  uint64_t seed = 7301;
  for (const GqaDims& d : kShapes) {
    const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH, NKV = d.NKV, hs = d.hs(), row = d.row();
    const std::string why = cuda::fused_attention_unavailable(B, T, C, NH, NKV);
    ASSERT_EQ(why, "") << "fused attention [" << B << ", " << T << ", " << C << "] in " << NH << " heads over " << NKV
                       << " key/value heads";
    const Tensor qkv = random_host({B, T, row}, seed++), dout = random_host({B, T, C}, seed++);
    Tensor out_ref = Tensor::empty({B, T, C}), lse = Tensor::empty({B, NH, T}), dqkv_ref = Tensor::empty({B, T, row});
    cpu::flash_attention_forward(out_ref.f32(), lse.f32(), qkv.f32(), B, T, NH, NKV, hs);
    std::vector<float> scratch(size_t(cpu::flash_attention_scratch_floats(T, hs)));
    cpu::flash_attention_backward(dqkv_ref.f32(), scratch.data(), dout.f32(), qkv.f32(), out_ref.f32(), lse.f32(), B, T,
                                  NH, NKV, hs);

    const Tensor d_qkv = to_device(qkv, gpu()), d_dout = to_device(dout, gpu());
    const size_t saved_bytes = cuda::fused_attention_saved_bytes(B, T, C, NH, /*bf16_io=*/false, NKV);
    const Tensor saved = poisoned({int64_t(saved_bytes + 3) / 4});
    const Tensor out = poisoned({B, T, C}), dqkv = poisoned({B, T, row});
    cuda::fused_attention_forward(out.f32(), saved.f32(), d_qkv.f32(), B, T, C, NH, /*bf16_io=*/false, NKV);
    report("fused_attention_gqa_forward" + d.suffix, "bf16", rel_error(out, out_ref), kForwardLimit);
    cuda::fused_attention_backward(dqkv.f32(), d_dout.f32(), saved.f32(), nullptr, nullptr, B, T, C, NH,
                                   /*bf16_io=*/false, /*dqkv_bf16=*/false, NKV);
    report("fused_attention_gqa_backward" + d.suffix, "bf16", rel_error(dqkv, dqkv_ref), kBackwardLimit);
    // dK and dV on their own (each a sum over its group's query heads), so
    // that dQ's share of the norm cannot hide them.
    const Tensor dqkv_host = gpu_test::to_host(dqkv);
    report("fused_attention_gqa_backward_dkv" + d.suffix, "bf16",
           rel_error(columns(dqkv_host, C, row), columns(dqkv_ref, C, row)), kBackwardLimit);
  }
}

// With f32 io the forward keeps bf16 copies of qkv, (NH + 2 NKV) hs channels
// a token, and of O; with bf16 io only the log-sum-exp rows.
TEST(CudaFusedAttentionGqa, SavesCopiesOfTheGroupedQkv) {
  ST_REQUIRE_GPU();
  constexpr size_t kPadding = 2 * 256;  // at most what aligning the two copies adds
  for (const GqaDims& d : kShapes) {
    const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH, NKV = d.NKV;
    const size_t in_place = cuda::fused_attention_saved_bytes(B, T, C, NH, /*bf16_io=*/true, NKV);
    const size_t copies = cuda::fused_attention_saved_bytes(B, T, C, NH, /*bf16_io=*/false, NKV);
    EXPECT_EQ(in_place, size_t(B * NH * T) * sizeof(float)) << d.suffix;
    const size_t bf16_copies = size_t(B * T * (d.row() + C)) * 2;
    EXPECT_GE(copies, in_place + bf16_copies) << d.suffix;
    EXPECT_LT(copies, in_place + bf16_copies + kPadding) << d.suffix;
    if (NKV < NH) {
      EXPECT_LT(copies, cuda::fused_attention_saved_bytes(B, T, C, NH)) << d.suffix;
    }
  }
}

// Mixed precision's bf16 qkv and O, read and written in place, against f32
// ones that go through the kernel's own bf16 copies: with qkv's values
// already bf16, both run the same cuDNN graphs on the same bits.
TEST(CudaFusedAttentionGqa, Bf16TensorsInPlaceGiveTheBitsOfTheCopies) {
  ST_REQUIRE_GPU();
  const GqaDims d = kShapes.front();
  const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH, NKV = d.NKV, row = d.row();
  ASSERT_EQ(cuda::fused_attention_unavailable(B, T, C, NH, NKV), "");
  const Tensor qkv16 = Tensor::empty({B, T, row}, DType::bf16, gpu()), qkv = poisoned({B, T, row});
  ops::convert(qkv16, to_device(random_host({B, T, row}, 7401), gpu()));
  ops::convert(qkv, qkv16);  // f32 values a bf16 holds exactly
  const Tensor dout = to_device(random_host({B, T, C}, 7402), gpu());

  const Tensor saved = poisoned({int64_t(cuda::fused_attention_saved_bytes(B, T, C, NH, false, NKV) + 3) / 4});
  const Tensor out = poisoned({B, T, C}), dqkv = poisoned({B, T, row});
  cuda::fused_attention_forward(out.f32(), saved.f32(), qkv.f32(), B, T, C, NH, /*bf16_io=*/false, NKV);
  cuda::fused_attention_backward(dqkv.f32(), dout.f32(), saved.f32(), nullptr, nullptr, B, T, C, NH,
                                 /*bf16_io=*/false, /*dqkv_bf16=*/false, NKV);

  const Tensor saved16 = poisoned({int64_t(cuda::fused_attention_saved_bytes(B, T, C, NH, true, NKV) + 3) / 4});
  const Tensor out16 = poisoned({B, T, C}, DType::bf16), dqkv16 = poisoned({B, T, row}, DType::bf16);
  cuda::fused_attention_forward(out16.raw(), saved16.raw(), qkv16.raw(), B, T, C, NH, /*bf16_io=*/true, NKV);
  cuda::fused_attention_backward(dqkv16.raw(), dout.f32(), saved16.raw(), qkv16.raw(), out16.raw(), B, T, C, NH,
                                 /*bf16_io=*/true, /*dqkv_bf16=*/true, NKV);

  const Tensor out_wide = poisoned({B, T, C}), dqkv_wide = poisoned({B, T, row});
  ops::convert(out_wide, out16);
  ops::convert(dqkv_wide, dqkv16);
  const Tensor a = gpu_test::to_host(out), b = gpu_test::to_host(out_wide);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "O, rel. " << rel_error(out_wide, a);
  const Tensor da = gpu_test::to_host(dqkv), db = gpu_test::to_host(dqkv_wide);
  EXPECT_EQ(std::memcmp(da.raw(), db.raw(), da.nbytes()), 0) << "dQKV, rel. " << rel_error(dqkv_wide, da);
}

TEST(CudaFusedAttentionGqa, SaysWhyWhereHeadsDoNotGroup) {
  ST_REQUIRE_GPU();
  // 6 query heads of 32 channels: 4 key/value heads do not divide them, 12
  // are more than there are query heads.
  for (const int64_t NKV : {4, 12}) {
    const std::string why = cuda::fused_attention_unavailable(2, 32, 192, 6, NKV);
    EXPECT_NE(why, "") << NKV << " key/value heads";
#ifdef SHARDTRAIN_HAVE_CUDNN_FRONTEND  // otherwise the reason is the missing frontend
    EXPECT_NE(why.find("key/value heads"), std::string::npos) << why;
#endif
  }
#ifdef SHARDTRAIN_HAVE_CUDNN_FRONTEND
  EXPECT_EQ(cuda::fused_attention_unavailable(2, 32, 192, 6, -1), "no attention shape");
#endif
}

}  // namespace
}  // namespace shardtrain

#else  // no CUDA backend in this build

TEST(CudaFusedAttentionGqa, NeedsTheCudaBackend) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }

#endif
