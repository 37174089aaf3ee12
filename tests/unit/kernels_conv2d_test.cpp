#include "kernels/cpu/conv2d.h"

#include "kernels/cpu/onednn_conv.h"

#include "tests/unit/kernels_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

std::string name(const Conv2dShape& s) {
  return fmt::format("B{} C{} {}x{} OC{} K{} S{} P{}", s.B, s.C, s.H, s.W, s.OC, s.K, s.stride, s.pad);
}

// Square kernels with stride 1/2, padding 0/1/2, non-square images, a 1x1
// kernel (the no-copy path), and a kernel as large as the padded image.
const std::vector<Conv2dShape> kShapes = {
    {2, 3, 7, 5, 4, 3, 2, 1},  // stride 2, pad 1, non-square
    {2, 2, 6, 8, 3, 3, 1, 2},  // pad 2 (outputs larger than the input)
    {1, 2, 5, 5, 2, 5, 1, 2},  // 5x5 "same" convolution
    {2, 3, 4, 3, 2, 1, 1, 0},  // 1x1: col is the image itself
    {1, 2, 6, 7, 3, 2, 2, 0},  // even kernel, stride 2, no padding
    {1, 1, 3, 3, 2, 7, 1, 2},  // kernel as large as the padded image: 1x1 output
};

// Many channels, so that oneDNN's blocked kernels run both passes (backward
// needs 8 input channels): channel counts off its blocks of 8 and 16,
// strides, padding, a 1x1 kernel.
const std::vector<Conv2dShape> kBlockedShapes = {
    {2, 9, 7, 6, 5, 3, 1, 1},     // 9 -> 5 channels, non-square
    {3, 16, 8, 8, 17, 5, 2, 2},   // stride 2, 17 output channels
    {2, 8, 5, 5, 8, 1, 1, 0},     // 1x1
    {1, 24, 9, 11, 10, 4, 1, 2},  // even kernel, pad 2
    {300, 8, 5, 5, 8, 3, 1, 1},   // three chunks of samples (128, 128, 44)
};

// Direct convolution, in double.
std::vector<double> direct_conv(const std::vector<float>& in, const std::vector<float>& w, const std::vector<float>& b,
                                const Conv2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW();
  std::vector<double> out(size_t(s.B * s.OC * OH * OW));
  for (int64_t n = 0; n < s.B; ++n)
    for (int64_t o = 0; o < s.OC; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b[o];
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t ki = 0; ki < s.K; ++ki)
              for (int64_t kj = 0; kj < s.K; ++kj) {
                const int64_t ih = oh * s.stride - s.pad + ki, iw = ow * s.stride - s.pad + kj;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                acc += double(in[((n * s.C + c) * s.H + ih) * s.W + iw]) * w[((o * s.C + c) * s.K + ki) * s.K + kj];
              }
          out[((n * s.OC + o) * OH + oh) * OW + ow] = acc;
        }
  return out;
}

TEST(Conv2d, ForwardMatchesDirectConvolution) {
  std::vector<Conv2dShape> shapes = kShapes;
  shapes.insert(shapes.end(), kBlockedShapes.begin(), kBlockedShapes.end());
  for (const CpuBackend backend : testing::kCpuBackends)
    for (const auto& s : shapes) {
      const testing::ScopedCpuBackend scoped(backend);
      const auto in = uniform_vector(s.B * s.C * s.H * s.W, 1);
      const auto w = uniform_vector(s.OC * s.C * s.K * s.K, 2), b = uniform_vector(s.OC, 3);
      std::vector<float> out(s.B * s.OC * s.OH() * s.OW(), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> col(s.col_floats());
      conv2d_forward(out.data(), in.data(), w.data(), b.data(), col.data(), s);
      const auto ref = direct_conv(in, w, b, s);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], ref[i], 1e-5 * std::sqrt(double(s.C * s.K * s.K)))
            << name_of(backend) << " " << name(s) << " @" << i;
    }
}

TEST(Conv2d, Col2imIsTheAdjointOfIm2col) {
  // <im2col(x), y> == <x, col2im(y)> for every x, y: col2im sums exactly the
  // entries im2col copied, and drops the padding.
  for (const auto& s : kShapes) {
    const auto x = uniform_vector(s.C * s.H * s.W, 4);
    const auto y = uniform_vector(s.col_floats(), 5);
    std::vector<float> col(s.col_floats(), 99.0f), img(x.size(), 99.0f);
    im2col(col.data(), x.data(), s);
    col2im(img.data(), y.data(), s);
    EXPECT_NEAR(dot(col, y), dot(x, img), 1e-4) << name(s);
  }
}

// im2col and col2im against their definitions, bit for bit, with each row
// copy the CPU has (AVX-512, AVX2, portable): widths below, at and above one
// vector (7, 8, 14, 16, 17, 33 columns) so full vectors and masked tails run.
TEST(Conv2d, Im2colAndCol2imAreTheirDefinitionsWithEveryRowCopy) {
  const std::vector<Conv2dShape> shapes = {
      {1, 3, 7, 7, 1, 3, 1, 1},  {1, 2, 8, 8, 1, 5, 1, 2},  {1, 32, 14, 14, 1, 5, 1, 2}, {1, 2, 16, 16, 1, 3, 1, 0},
      {1, 2, 5, 17, 1, 3, 1, 1}, {1, 1, 4, 33, 1, 5, 1, 2}, {1, 3, 7, 5, 1, 3, 2, 1}};  // stride 2: the general path
  for (const int isa : {2, 1, 0}) {
    const int before = set_conv_row_isa(isa);
    for (const auto& s : shapes) {
      const int64_t OH = s.OH(), OW = s.OW();
      const auto x = uniform_vector(s.C * s.H * s.W, 6);
      const auto y = uniform_vector(s.col_floats(), 7);
      std::vector<float> col(s.col_floats(), 99.0f), img(x.size(), 99.0f);
      im2col(col.data(), x.data(), s);
      col2im(img.data(), y.data(), s);
      std::vector<float> want_col(s.col_floats()), want_img(x.size(), 0.0f);
      for (int64_t c = 0; c < s.C; ++c)
        for (int64_t ki = 0; ki < s.K; ++ki)
          for (int64_t kj = 0; kj < s.K; ++kj)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t r = (c * s.K + ki) * s.K + kj, ih = oh * s.stride - s.pad + ki,
                              iw = ow * s.stride - s.pad + kj;
                const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
                const size_t e = size_t(r * OH * OW + oh * OW + ow);
                want_col[e] = inside ? x[size_t((c * s.H + ih) * s.W + iw)] : 0.0f;
                if (inside) want_img[size_t((c * s.H + ih) * s.W + iw)] += y[e];
              }
      EXPECT_EQ(col, want_col) << name(s) << " row copies " << isa;
      EXPECT_EQ(img, want_img) << name(s) << " row copies " << isa;
    }
    set_conv_row_isa(before);
  }
}

TEST(Conv2d, BackwardMatchesFiniteDifferences) {
  std::vector<Conv2dShape> shapes = kShapes;
  shapes.push_back({2, 8, 4, 5, 3, 3, 1, 1});  // oneDNN's backward
  for (const CpuBackend backend : testing::kCpuBackends)
    for (const auto& s : shapes) {
      const testing::ScopedCpuBackend scoped(backend);
      auto in = uniform_vector(s.B * s.C * s.H * s.W, 6);
      auto w = uniform_vector(s.OC * s.C * s.K * s.K, 7), b = uniform_vector(s.OC, 8);
      const auto R = uniform_vector(s.B * s.OC * s.OH() * s.OW(), 9);
      std::vector<float> out(R.size()), col(s.col_floats());
      auto loss = [&] {
        conv2d_forward(out.data(), in.data(), w.data(), b.data(), col.data(), s);
        return dot(out, R);
      };
      std::vector<float> din(in.size()), dw(w.size()), db(b.size());
      conv2d_backward(din.data(), dw.data(), db.data(), R.data(), in.data(), w.data(), col.data(), s, false);
      const std::string what = fmt::format("{} {}", name_of(backend), name(s));
      expect_gradient(in, din, loss, 1e-2f, 1e-3, "din " + what);
      expect_gradient(w, dw, loss, 1e-2f, 1e-3, "dweight " + what);
      expect_gradient(b, db, loss, 1e-2f, 1e-3, "dbias " + what);
    }
}

void accumulate_adds_and_overwrite_ignores_garbage(const Conv2dShape& s) {
  const auto in = uniform_vector(s.B * s.C * s.H * s.W, 10);
  const auto w = uniform_vector(s.OC * s.C * s.K * s.K, 11);
  const auto dout = uniform_vector(s.B * s.OC * s.OH() * s.OW(), 12);
  std::vector<float> col(s.col_floats());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> din(in.size(), nan), dw(w.size(), nan), db(s.OC, nan);
  conv2d_backward(din.data(), dw.data(), db.data(), dout.data(), in.data(), w.data(), col.data(), s, false);
  for (float v : dw) ASSERT_FALSE(std::isnan(v));
  for (float v : db) ASSERT_FALSE(std::isnan(v));
  for (float v : din) ASSERT_FALSE(std::isnan(v));
  auto dw2 = uniform_vector(w.size(), 13), db2 = uniform_vector(s.OC, 14);
  const auto dw0 = dw2, db0 = db2;
  // din may be null (a first layer).
  conv2d_backward(nullptr, dw2.data(), db2.data(), dout.data(), in.data(), w.data(), col.data(), s, true);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw2[i], dw0[i] + dw[i], 1e-5) << i;
  for (int64_t o = 0; o < s.OC; ++o) EXPECT_NEAR(db2[o], db0[o] + db[o], 1e-5) << o;
}

TEST(Conv2d, AccumulateAddsAndOverwriteIgnoresGarbage) {
  for (const CpuBackend backend : testing::kCpuBackends)
    for (const Conv2dShape& s : {Conv2dShape{3, 2, 5, 6, 3, 3, 1, 1}, Conv2dShape{3, 9, 5, 6, 3, 3, 1, 1}}) {
      const testing::ScopedCpuBackend scoped(backend);
      accumulate_adds_and_overwrite_ignores_garbage(s);
    }
}

// Both libraries give the same gradients (to f32 rounding) on shapes where
// oneDNN computes both backward passes, with and without an input gradient.
TEST(Conv2d, OnednnBackwardMatchesIm2col) {
  for (const auto& s : kBlockedShapes) {
    ASSERT_TRUE(onednn_conv_route(s).backward || cpu_backend() == CpuBackend::openblas) << name(s);
    const auto in = uniform_vector(s.B * s.C * s.H * s.W, 31), w = uniform_vector(s.OC * s.C * s.K * s.K, 32);
    const auto dout = uniform_vector(s.B * s.OC * s.OH() * s.OW(), 33);
    std::vector<float> col(s.col_floats());
    auto backward = [&](CpuBackend backend, bool input_gradient) {
      const testing::ScopedCpuBackend scoped(backend);
      std::vector<float> din(in.size()), dw(w.size()), db(size_t(s.OC));
      conv2d_backward(input_gradient ? din.data() : nullptr, dw.data(), db.data(), dout.data(), in.data(), w.data(),
                      col.data(), s, false);
      return std::vector<std::vector<float>>{din, dw, db};
    };
    for (const bool input_gradient : {true, false}) {
      const auto want = backward(CpuBackend::openblas, input_gradient);
      const auto got = backward(CpuBackend::onednn, input_gradient);
      const double tol = 1e-5 * std::sqrt(double(s.B * s.OH() * s.OW() * s.OC));
      for (size_t t = 0; t < want.size(); ++t)
        for (size_t i = 0; i < want[t].size(); ++i)
          ASSERT_NEAR(got[t][i], want[t][i], tol) << name(s) << " gradient " << t << " @" << i;
    }
  }
}

// Under bf16 products, oneDNN's bf16 convolutions (where the CPU has bf16
// kernels) give what im2col's products of the same rounded operands give,
// to f32 accumulation: the output and all three gradients.
TEST(Conv2d, OnednnBf16MatchesIm2colOnTheSameRoundedOperands) {
  if (!onednn_native_bf16()) GTEST_SKIP() << "oneDNN has no bf16 kernels for this CPU (" << onednn_version() << ")";
  set_gemm_precision(GemmPrecision::bf16);
  for (const auto& s : kBlockedShapes) {
    const auto in = uniform_vector(s.B * s.C * s.H * s.W, 51), w = uniform_vector(s.OC * s.C * s.K * s.K, 52);
    const auto b = uniform_vector(s.OC, 53), dout = uniform_vector(s.B * s.OC * s.OH() * s.OW(), 54);
    std::vector<float> col(s.col_floats());
    auto run = [&](CpuBackend backend) {
      const testing::ScopedCpuBackend scoped(backend);
      EXPECT_EQ(onednn_conv_route(s).forward, backend == CpuBackend::onednn) << name(s);
      std::vector<float> out(dout.size()), din(in.size()), dw(w.size()), db(size_t(s.OC));
      conv2d_forward(out.data(), in.data(), w.data(), b.data(), col.data(), s);
      conv2d_backward(din.data(), dw.data(), db.data(), dout.data(), in.data(), w.data(), col.data(), s, false);
      return std::vector<std::vector<float>>{out, din, dw, db};
    };
    const auto want = run(CpuBackend::openblas), got = run(CpuBackend::onednn);
    const double tol = 1e-5 * std::sqrt(double(s.B * s.OH() * s.OW() * s.OC));
    for (size_t t = 0; t < want.size(); ++t)
      for (size_t i = 0; i < want[t].size(); ++i)
        ASSERT_NEAR(got[t][i], want[t][i], tol) << name(s) << " result " << t << " @" << i;
  }
  set_gemm_precision(GemmPrecision::f32);
}

// The route depends on the setting, the shape and the precision only.
TEST(Conv2d, OnednnRouteFollowsTheSettingTheChannelsAndThePrecision) {
  const Conv2dShape one_channel{4, 1, 28, 28, 32, 5, 1, 2}, many{4, 32, 14, 14, 64, 5, 1, 2};
  {
    const testing::ScopedCpuBackend scoped(CpuBackend::openblas);
    EXPECT_FALSE(onednn_conv_route(many).forward);
    EXPECT_FALSE(onednn_conv_route(many).backward);
  }
  for (const CpuBackend backend : {CpuBackend::automatic, CpuBackend::onednn}) {
    const testing::ScopedCpuBackend scoped(backend);
    EXPECT_TRUE(onednn_conv_route(many).forward);
    EXPECT_TRUE(onednn_conv_route(many).backward);
    EXPECT_TRUE(onednn_conv_route(one_channel).forward);
    EXPECT_FALSE(onednn_conv_route(one_channel).backward);  // fewer channels than a block: im2col
    set_gemm_precision(GemmPrecision::bf16);
    // oneDNN's bf16 kernels where the CPU has them, else im2col rounds the operands.
    EXPECT_EQ(onednn_conv_route(many).forward, onednn_native_bf16());
    EXPECT_EQ(onednn_conv_route(many).backward, onednn_native_bf16());
    set_gemm_precision(GemmPrecision::f32);
  }
}

// oneDNN's passes are recorded with their FLOPs (im2col's as its GEMMs), the
// same bits come out of a repeated pass, and its buffers are counted.
TEST(Conv2d, OnednnPassesAreRecordedRepeatableAndCounted) {
  const testing::ScopedCpuBackend scoped(CpuBackend::onednn);
  const Conv2dShape s{2, 16, 6, 6, 8, 3, 1, 1};
  const auto in = uniform_vector(s.B * s.C * s.H * s.W, 41), w = uniform_vector(s.OC * s.C * s.K * s.K, 42);
  const auto b = uniform_vector(s.OC, 43);
  std::vector<float> col(s.col_floats()), out1(s.B * s.OC * s.OH() * s.OW()), out2(out1.size(), 5.0f);
  std::vector<float> din(in.size()), dw(w.size()), db(b.size());
  GemmRecorder recorder;
  conv2d_forward(out1.data(), in.data(), w.data(), b.data(), col.data(), s);
  conv2d_forward(out2.data(), in.data(), w.data(), b.data(), col.data(), s);
  conv2d_backward(din.data(), dw.data(), db.data(), out1.data(), in.data(), w.data(), col.data(), s, false);
  EXPECT_EQ(out1, out2);
  EXPECT_TRUE(recorder.calls().empty());
  ASSERT_EQ(recorder.convs().size(), 3u);
  EXPECT_FALSE(recorder.convs()[0].backward);
  EXPECT_TRUE(recorder.convs()[2].backward && recorder.convs()[2].input_gradient);
  EXPECT_DOUBLE_EQ(recorder.flops(), 4 * s.forward_flops());
  EXPECT_GE(onednn_conv_workspace_bytes(), sizeof(float) * size_t(s.B * s.C * s.H * s.W));
}

// One rank per core: oneDNN runs on the calling thread (runtime.blas_threads
// = 1) and starts no OpenMP team of one thread per core, whatever
// OMP_NUM_THREADS says. A new shape on a fresh thread, so that its
// primitives are created here.
TEST(Conv2d, OnednnStartsNoThreads) {
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator());
  };
  std::thread([&] {
    const testing::ScopedCpuBackend scoped(CpuBackend::onednn);
    const Conv2dShape s{4, 16, 10, 10, 24, 3, 1, 1};
    const auto in = uniform_vector(s.B * s.C * s.H * s.W, 51), w = uniform_vector(s.OC * s.C * s.K * s.K, 52);
    std::vector<float> col(s.col_floats()), out(s.B * s.OC * s.OH() * s.OW()), din(in.size()), dw(w.size());
    const auto before = threads();
    for (int i = 0; i < 3; ++i) {
      conv2d_forward(out.data(), in.data(), w.data(), nullptr, col.data(), s);
      conv2d_backward(din.data(), dw.data(), nullptr, out.data(), in.data(), w.data(), col.data(), s, false);
    }
    EXPECT_EQ(threads(), before);
  }).join();
}

}  // namespace
}  // namespace shardtrain::cpu
