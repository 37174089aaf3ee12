// A convolution and the 2x2 max-pool after it, pooled straight from
// oneDNN's layout (ops::conv2d_maxpool_forward): the same bits and indices
// as the convolution's NCHW output pooled, in f32 and bf16, and the
// fallback where it does not apply.
#include "kernels/cpu/activation.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/pool.h"
#include "kernels/ops.h"

#include "tests/unit/kernels_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::uniform_vector;

// in [B, C, H, W] NCHW copied into a layout of 16-channel blocks.
std::vector<float> to_channel_blocks(const std::vector<float>& in, const Pool2dShape& s, const ChannelBlocks16& l) {
  std::vector<float> out(size_t(s.B * l.sample));
  for (int64_t n = 0; n < s.B; ++n)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t p = 0; p < s.H * s.W; ++p)
        out[size_t(n * l.sample + (c / 16) * l.block + p * l.pixel + c % 16)] =
            in[size_t((n * s.C + c) * s.H * s.W + p)];
  return out;
}

// The NCHW pool, then with `relu` the ReLU after it: the value ReLU gives
// and index -1 where it gives 0.
void pool_then_relu(std::vector<float>& out, std::vector<int32_t>& arg, const std::vector<float>& in,
                    const Pool2dShape& s, bool relu) {
  maxpool2d_forward(out.data(), arg.data(), in.data(), s);
  if (!relu) return;
  std::vector<float> r(out.size());
  relu_forward(r.data(), out.data(), int64_t(out.size()));
  for (size_t i = 0; i < out.size(); ++i)
    if (!(out[i] > 0.0f)) arg[i] = -1;
  out = r;
}

// Ties, signed zeros, infinities and NaNs among the taps, in NHWC and in
// nChw16c, a row of more than 16 outputs, with and without the ReLU, in
// AVX-512 and in the portable loops: the NCHW pool's outputs and indices
// exactly.
TEST(ConvPool, ChannelBlockPoolIsTheNchwPool) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials = {0.0f, -0.0f, 1.0f, 1.0f, nan, inf, -inf, -1.0f};
  const bool before = set_maxpool_avx512(true);
  for (bool wide : {true, false}) {
    set_maxpool_avx512(wide);
    for (const Pool2dShape& s :
         {Pool2dShape{2, 32, 14, 14, 2, 2}, Pool2dShape{3, 16, 4, 6, 2, 2}, Pool2dShape{1, 16, 4, 70, 2, 2}}) {
      auto in = uniform_vector(s.B * s.C * s.H * s.W, 21);
      Rng rng(22);
      for (float& x : in)
        if (rng.below(3) == 0) x = specials[rng.below(specials.size())];
      const size_t outputs = size_t(s.B * s.C * s.OH() * s.OW());
      const int64_t pixels = s.H * s.W;
      for (bool relu : {false, true}) {
        std::vector<float> want(outputs);
        std::vector<int32_t> want_arg(outputs);
        pool_then_relu(want, want_arg, in, s, relu);
        for (const ChannelBlocks16& layout :
             {ChannelBlocks16{pixels * s.C, 16, s.C}, ChannelBlocks16{s.C * pixels, pixels * 16, 16}}) {
          const auto blocked = to_channel_blocks(in, s, layout);
          std::vector<float> got(outputs);
          std::vector<int32_t> got_arg(outputs);
          maxpool_2x2_from_channel_blocks(got.data(), got_arg.data(), blocked.data(), s, layout, relu);
          const std::string what =
              fmt::format("C{} W{} pixel {} relu {} avx512 {}", s.C, s.W, layout.pixel, relu, wide);
          EXPECT_EQ(std::memcmp(got.data(), want.data(), outputs * sizeof(float)), 0) << what;
          EXPECT_EQ(got_arg, want_arg) << what;
        }
      }
    }
  }
  set_maxpool_avx512(before);
}

// The ReLU made with the pool, forward and backward: the bits of the pool,
// then the ReLU, and back through both.
TEST(ConvPool, ReluMadeWithThePoolIsTheReluAfterIt) {
  const testing::ScopedCpuBackend scoped(CpuBackend::onednn);
  const Conv2dShape s{5, 3, 12, 12, 32, 3, 1, 1};
  const Pool2dShape p{s.B, s.OC, s.OH(), s.OW(), 2, 2};
  ASSERT_TRUE(ops::conv2d_maxpool_fuses(Device::cpu(), s, p));
  auto tensor = [](const std::vector<float>& v, Shape shape) {
    Tensor t = Tensor::empty(std::move(shape));
    std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
    return t;
  };
  const Tensor x = tensor(uniform_vector(s.B * s.C * s.H * s.W, 51), {s.B, s.C, s.H, s.W}),
               weight = tensor(uniform_vector(s.OC * s.C * s.K * s.K, 52), {s.OC, s.C, s.K, s.K}),
               col = Tensor::empty({s.col_floats()});
  auto b = uniform_vector(s.OC, 53);
  for (float& v : b) v -= 1.0f;  // enough windows whose max is below 0
  const Tensor bias = tensor(b, {s.OC});
  const Shape pooled_shape{p.B, p.C, p.OH(), p.OW()};
  const int64_t outputs = pooled_shape.numel();
  Tensor pooled = Tensor::empty(pooled_shape), arg = Tensor::empty({outputs}, DType::i32);
  ops::conv2d_maxpool_forward(pooled, arg, Tensor(), x, weight, bias, col, s, p);
  Tensor want = Tensor::empty(pooled_shape);
  ops::relu_forward(want, pooled);
  Tensor got = Tensor::empty(pooled_shape), got_arg = Tensor::empty({outputs}, DType::i32);
  ops::conv2d_maxpool_forward(got, got_arg, Tensor(), x, weight, bias, col, s, p, true);
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
  int64_t zeroed = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    const bool kept = pooled.f32()[i] > 0.0f;
    zeroed += kept ? 0 : 1;
    EXPECT_EQ(got_arg.i32()[i], kept ? arg.i32()[i] : -1) << i;
  }
  EXPECT_GT(zeroed, outputs / 10);  // both kinds of windows are there
  EXPECT_GT(outputs - zeroed, outputs / 10);
  // Backward: the ReLU's then the pool's, against the pool's alone on the
  // indices the ReLU marked.
  const Tensor g = tensor(uniform_vector(outputs, 54), pooled_shape);
  Tensor dr = Tensor::empty(pooled_shape), want_din = Tensor::empty({s.B, s.OC, s.OH(), s.OW()});
  ops::relu_backward(dr, g, want);
  ops::maxpool2d_backward(want_din, dr, arg, p);
  Tensor got_din = Tensor::empty({s.B, s.OC, s.OH(), s.OW()});
  ops::maxpool2d_backward(got_din, g, got_arg, p);
  EXPECT_EQ(std::memcmp(got_din.raw(), want_din.raw(), want_din.nbytes()), 0);
  // Only where the pool reads the convolution's layout.
  const Conv2dShape unfused{2, 8, 10, 10, 24, 3, 1, 1};
  const Pool2dShape unfused_pool{2, 24, 10, 10, 2, 2};
  ASSERT_FALSE(ops::conv2d_maxpool_fuses(Device::cpu(), unfused, unfused_pool));
  const Tensor x2 = Tensor::zeros({2, 8, 10, 10}), w2 = Tensor::zeros({24, 8, 3, 3}), b2 = Tensor::zeros({24});
  const Tensor col2 = Tensor::empty({unfused.col_floats()}), p2 = Tensor::empty({2, 24, 5, 5});
  EXPECT_THROW(ops::conv2d_maxpool_forward(p2, Tensor::empty({p2.numel()}, DType::i32), Tensor(), x2, w2, b2, col2,
                                           unfused, unfused_pool, true),
               Error);
}

// The convolutions of the CNN and a batch of three chunks (128, 128, 44):
// pooled from oneDNN's layout, the same bits as the NCHW output pooled.
TEST(ConvPool, OnednnPooledForwardIsTheConvolutionThenThePool) {
  const testing::ScopedCpuBackend scoped(CpuBackend::onednn);
  for (bool bf16 : {false, true}) {
    if (bf16 && !onednn_native_bf16()) continue;
    set_gemm_precision(bf16 ? GemmPrecision::bf16 : GemmPrecision::f32);
    for (const Conv2dShape& s : {Conv2dShape{4, 1, 28, 28, 32, 5, 1, 2}, Conv2dShape{300, 32, 14, 14, 64, 5, 1, 2},
                                 Conv2dShape{2, 16, 8, 8, 16, 3, 1, 1}}) {
      const std::string what = fmt::format("B{} C{} OC{} {}", s.B, s.C, s.OC, bf16 ? "bf16" : "f32");
      ASSERT_TRUE(onednn_conv_pools(s)) << what;
      const auto in = uniform_vector(s.B * s.C * s.H * s.W, 31), w = uniform_vector(s.OC * s.C * s.K * s.K, 32);
      const auto b = uniform_vector(s.OC, 33);
      const Pool2dShape p{s.B, s.OC, s.OH(), s.OW(), 2, 2};
      const size_t outputs = size_t(p.B * p.C * p.OH() * p.OW());
      std::vector<float> conv(size_t(s.B * s.OC * s.OH() * s.OW())), want(outputs), got(outputs);
      std::vector<int32_t> want_arg(outputs), got_arg(outputs);
      onednn_conv_forward(conv.data(), in.data(), w.data(), b.data(), s);
      maxpool2d_forward(want.data(), want_arg.data(), conv.data(), p);
      onednn_conv_maxpool_forward(got.data(), got_arg.data(), in.data(), w.data(), b.data(), s);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), outputs * sizeof(float)), 0) << what;
      EXPECT_EQ(got_arg, want_arg) << what;
    }
  }
  set_gemm_precision(GemmPrecision::f32);
}

// Where the pool cannot be made in place (im2col's convolution, a window
// other than 2x2/2, odd planes, channels off the 16-blocks, a GPU) the op
// writes the convolution's output and pools it; without a conv_out it
// makes a temporary one.
TEST(ConvPool, FallsBackToTheConvolutionThenThePool) {
  const Conv2dShape s{2, 8, 10, 10, 24, 3, 1, 1};  // 24 output channels: not whole blocks of 16
  const Pool2dShape p{s.B, s.OC, s.OH(), s.OW(), 2, 2};
  const testing::ScopedCpuBackend scoped(CpuBackend::onednn);
  EXPECT_FALSE(ops::conv2d_maxpool_fuses(Device::cpu(), s, p));
  EXPECT_FALSE(ops::conv2d_maxpool_fuses(Device::cpu(), {2, 8, 9, 9, 32, 3, 1, 1}, {2, 32, 9, 9, 2, 2}));
  EXPECT_FALSE(ops::conv2d_maxpool_fuses(Device::cpu(), {2, 8, 9, 9, 32, 3, 1, 1}, {2, 32, 9, 9, 3, 3}));
  EXPECT_FALSE(ops::conv2d_maxpool_fuses(Device::cuda(0), {2, 8, 10, 10, 32, 3, 1, 1}, {2, 32, 10, 10, 2, 2}));
  EXPECT_TRUE(ops::conv2d_maxpool_fuses(Device::cpu(), {2, 8, 10, 10, 32, 3, 1, 1}, {2, 32, 10, 10, 2, 2}));
  {
    const testing::ScopedCpuBackend im2col(CpuBackend::openblas);
    EXPECT_FALSE(ops::conv2d_maxpool_fuses(Device::cpu(), {2, 8, 10, 10, 32, 3, 1, 1}, {2, 32, 10, 10, 2, 2}));
  }
  const auto in = uniform_vector(s.B * s.C * s.H * s.W, 41), w = uniform_vector(s.OC * s.C * s.K * s.K, 42);
  const auto b = uniform_vector(s.OC, 43);
  auto tensor = [](const std::vector<float>& v, Shape shape) {
    Tensor t = Tensor::empty(std::move(shape));
    std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
    return t;
  };
  const Tensor x = tensor(in, {s.B, s.C, s.H, s.W}), weight = tensor(w, {s.OC, s.C, s.K, s.K}),
               bias = tensor(b, {s.OC}), col = Tensor::empty({s.col_floats()});
  Tensor conv = Tensor::empty({s.B, s.OC, s.OH(), s.OW()}), want = Tensor::empty({p.B, p.C, p.OH(), p.OW()});
  Tensor want_arg = Tensor::empty({want.numel()}, DType::i32);
  ops::conv2d_forward(conv, x, weight, bias, col, s);
  ops::maxpool2d_forward(want, want_arg, conv, p);
  for (bool with_conv_out : {true, false}) {
    Tensor got = Tensor::empty({p.B, p.C, p.OH(), p.OW()}), got_arg = Tensor::empty({want.numel()}, DType::i32);
    Tensor out = with_conv_out ? Tensor::empty({s.B, s.OC, s.OH(), s.OW()}) : Tensor();
    ops::conv2d_maxpool_forward(got, got_arg, out, x, weight, bias, col, s, p);
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << with_conv_out;
    EXPECT_EQ(std::memcmp(got_arg.raw(), want_arg.raw(), want_arg.nbytes()), 0) << with_conv_out;
    if (with_conv_out) {
      EXPECT_EQ(std::memcmp(out.raw(), conv.raw(), conv.nbytes()), 0);
    }
  }
}

}  // namespace
}  // namespace shardtrain::cpu
