// Mixed precision's ops (kernels/ops.h): where an activation is bf16, an op
// reads it exactly and rounds what it writes once. So each op on bf16
// tensors must give the bits of the f32 op on the widened inputs, rounded
// (the GPU's bf16 kernels are compared with these in
// tests/gpu/nn_mixed_precision_test.cpp). Wrong types are Errors naming
// the op.
#include "kernels/ops.h"
#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

namespace shardtrain {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

Tensor f32_tensor(const std::vector<float>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())});
  std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor random_f32(int64_t n, uint64_t key, float scale = 1.0f) {
  return f32_tensor(testing::uniform_vector(size_t(n), key, -scale, scale));
}

Tensor to_bf16(const Tensor& t) {
  Tensor out = Tensor::empty({t.numel()}, DType::bf16);
  ops::convert(out, t);
  return out;
}

Tensor to_f32(const Tensor& t) {
  Tensor out = Tensor::empty({t.numel()});
  ops::convert(out, t);
  return out;
}

// bf16 values as the f32 numbers they are (exact).
Tensor widened(const Tensor& t) { return to_f32(to_bf16(t)); }

// The f32 result rounded to bf16 and the bf16 result, bit for bit.
void expect_rounded_equal(const Tensor& bf16_result, const Tensor& f32_result, const char* what) {
  const Tensor expected = to_bf16(f32_result);
  ASSERT_EQ(bf16_result.dtype(), DType::bf16) << what;
  EXPECT_EQ(std::memcmp(bf16_result.raw(), expected.raw(), expected.nbytes()), 0) << what;
}

void expect_equal(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.nbytes(), b.nbytes()) << what;
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << what;
}

constexpr int64_t N = 6, IC = 16, OC = 24;

TEST(MixedPrecisionOps, LinearReadsAndWritesBf16AsTheRoundedF32Op) {
  const Tensor x = widened(random_f32(N * IC, 1)), w = random_f32(OC * IC, 2, 0.3f), b = random_f32(OC, 3);
  const Tensor x16 = to_bf16(x);
  Tensor ref = Tensor::empty({N * OC}), out16 = Tensor::empty({N * OC}, DType::bf16), out32 = Tensor::empty({N * OC});
  ops::linear_forward(ref, x.reshape({N, IC}), w.reshape({OC, IC}), b);
  ops::linear_forward(out16, x16.reshape({N, IC}), w.reshape({OC, IC}), b);
  expect_rounded_equal(out16, ref, "bf16 in, bf16 out");
  ops::linear_forward(out32, x16.reshape({N, IC}), w.reshape({OC, IC}), b);
  expect_equal(out32, ref, "bf16 in, f32 out");

  // With the GELU: pre and out both bf16, each the f32 value rounded once.
  Tensor pre_ref = Tensor::empty({N * OC}), gelu_ref = Tensor::empty({N * OC});
  Tensor pre16 = Tensor::empty({N * OC}, DType::bf16), gelu16 = Tensor::empty({N * OC}, DType::bf16);
  ops::linear_gelu_forward(gelu_ref, pre_ref, x.reshape({N, IC}), w.reshape({OC, IC}), b);
  ops::linear_gelu_forward(gelu16, pre16, x16.reshape({N, IC}), w.reshape({OC, IC}), b);
  expect_rounded_equal(pre16, pre_ref, "GELU input");
  expect_rounded_equal(gelu16, gelu_ref, "GELU output");
}

TEST(MixedPrecisionOps, LinearBackwardTakesBf16InputsAndGradients) {
  const Tensor x = widened(random_f32(N * IC, 4)), w = random_f32(OC * IC, 5, 0.3f);
  const Tensor dout = widened(random_f32(N * OC, 6)), pre = widened(random_f32(N * IC, 7));
  Tensor din_ref = Tensor::empty({N * IC}), dw_ref = Tensor::empty({OC * IC}), db_ref = Tensor::empty({OC});
  Tensor din16 = Tensor::empty({N * IC}, DType::bf16), dw = Tensor::empty({OC * IC}), db = Tensor::empty({OC});
  const Tensor wm = w.reshape({OC, IC});
  ops::linear_backward(din_ref, dw_ref, db_ref, dout, x, wm, false);
  ops::linear_backward(din16, dw, db, to_bf16(dout), to_bf16(x), wm, false);
  expect_rounded_equal(din16, din_ref, "input gradient");
  expect_equal(dw, dw_ref, "weight gradient (f32)");
  expect_equal(db, db_ref, "bias gradient (f32)");

  // Through a GELU whose input was bf16: dpre bf16 like pre.
  ops::linear_backward_through_gelu(din_ref, dw_ref, db_ref, dout, x, wm, pre, false);
  ops::linear_backward_through_gelu(din16, dw, db, dout, to_bf16(x), wm, to_bf16(pre), false);
  expect_rounded_equal(din16, din_ref, "GELU input gradient");
  expect_equal(dw, dw_ref, "weight gradient through the GELU");
}

// With bf16 products a bf16 output is made in chunks of rows (the f32
// product of each still in L2 when the GELU and the rounding read it): the
// bits of the whole product's f32 output rounded, over several chunks and a
// shorter last one.
TEST(MixedPrecisionOps, LinearBf16OutputInChunksOfRowsIsTheRoundedF32Output) {
  const testing::ScopedBf16Products bf16_products;
  if (!cpu::bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  constexpr int64_t rows = 1000, ic = 40, oc = 300;  // 873 rows a chunk, 436 with the GELU's input
  const Tensor x = widened(random_f32(rows * ic, 30)).reshape({rows, ic}), w = random_f32(oc * ic, 31, 0.3f);
  const Tensor b = random_f32(oc, 32), wm = w.reshape({oc, ic});
  Tensor ref = Tensor::empty({rows * oc}), out16 = Tensor::empty({rows * oc}, DType::bf16);
  ops::linear_forward(ref, x, wm, b);
  ops::linear_forward(out16, to_bf16(x).reshape({rows, ic}), wm, b);
  expect_rounded_equal(out16, ref, "linear");
  Tensor pre_ref = Tensor::empty({rows * oc}), gelu_ref = Tensor::empty({rows * oc});
  Tensor pre16 = Tensor::empty({rows * oc}, DType::bf16), gelu16 = Tensor::empty({rows * oc}, DType::bf16);
  ops::linear_gelu_forward(gelu_ref, pre_ref, x, wm, b);
  ops::linear_gelu_forward(gelu16, pre16, x, wm, b);
  expect_rounded_equal(pre16, pre_ref, "GELU input");
  expect_rounded_equal(gelu16, gelu_ref, "GELU output");
}

// Under mixed precision the CPU's linear layers keep the forward's bf16
// copies of the weight and an f32 input for the backward, as a GPU's do:
// the same rounded values, so the same bits as rounding them again.
TEST(MixedPrecisionOps, CpuLinearKeptCopiesGiveTheBitsOfRoundingAgain) {
  const testing::ScopedBf16Products bf16_products;
  if (!cpu::bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  constexpr int64_t rows = 37, ic = 53, oc = 29;  // odd sizes: the input's copy starts past a padded weight
  const Tensor w = random_f32(oc * ic, 1, 0.3f).reshape({oc, ic}), b = random_f32(oc, 2);
  const Tensor dout = random_f32(rows * oc, 3), pre = widened(random_f32(rows * ic, 4));
  for (DType in_type : {DType::f32, DType::bf16}) {
    const Tensor x32 = random_f32(rows * ic, 5).reshape({rows, ic});
    const Tensor x = in_type == DType::f32 ? x32 : to_bf16(x32).reshape({rows, ic});
    const char* what = in_type == DType::f32 ? "f32 input" : "bf16 input";
    Tensor out_ref = Tensor::empty({rows * oc}), out = Tensor::empty({rows * oc});
    Tensor din_ref = Tensor::empty({rows * ic}), dw_ref = Tensor::empty({oc * ic}), db_ref = Tensor::empty({oc});
    Tensor din = Tensor::empty({rows * ic}), dw = Tensor::empty({oc * ic}), db = Tensor::empty({oc});
    ops::linear_forward(out_ref, x, w, b);
    ops::linear_backward_through_gelu(din_ref, dw_ref, db_ref, dout, x, w, pre, false);

    ops::set_cpu_linear_keeps_bf16(true);
    ASSERT_TRUE(ops::linear_keeps_bf16(Device::cpu()));
    Tensor kept = Tensor::empty({ops::linear_kept_elements(rows, ic, oc, in_type)}, DType::bf16);
    ops::linear_forward(out, x, w, b, kept);
    expect_equal(out, out_ref, what);
    ops::linear_backward_through_gelu(din, dw, db, dout, x, w, pre, false, kept);
    expect_equal(din, din_ref, what);
    expect_equal(dw, dw_ref, what);
    expect_equal(db, db_ref, what);
    // A later micro-batch on the same weights converts only its input.
    const Tensor x2 = in_type == DType::f32 ? random_f32(rows * ic, 6) : to_bf16(random_f32(rows * ic, 6));
    Tensor out2_ref = Tensor::empty({rows * oc}), out2 = Tensor::empty({rows * oc});
    ops::linear_forward(out2_ref, x2.reshape({rows, ic}), w, b);
    ops::linear_forward(out2, x2.reshape({rows, ic}), w, b, kept, /*keep_has_weight=*/true);
    expect_equal(out2, out2_ref, what);

    ops::set_cpu_linear_keeps_bf16(false);
    EXPECT_FALSE(ops::linear_keeps_bf16(Device::cpu()));
  }
}

TEST(MixedPrecisionOps, LayerNormWritesBf16FromAnF32Residual) {
  constexpr int64_t C = 32;
  const Tensor x = random_f32(N * C, 8, 2.0f), r = random_f32(N * C, 9, 2.0f);
  const Tensor w = random_f32(C, 10), b = random_f32(C, 11);
  Tensor mean = Tensor::empty({N}), rstd = Tensor::empty({N});
  Tensor ref = Tensor::empty({N * C}), out16 = Tensor::empty({N * C}, DType::bf16);
  ops::layernorm_forward(ref, mean, rstd, x, w, b, 1e-5f);
  ops::layernorm_forward(out16, mean, rstd, x, w, b, 1e-5f);
  expect_rounded_equal(out16, ref, "layernorm");

  Tensor sum_ref = Tensor::empty({N * C}), sum = Tensor::empty({N * C});
  ops::residual_layernorm_forward(sum_ref, ref, mean, rstd, x, r, w, b, 1e-5f);
  ops::residual_layernorm_forward(sum, out16, mean, rstd, x, r, w, b, 1e-5f);
  expect_equal(sum, sum_ref, "the residual sum stays f32");
  expect_rounded_equal(out16, ref, "residual layernorm");
}

TEST(MixedPrecisionOps, AttentionReadsBf16QkvAndWritesBf16) {
  constexpr int64_t B = 2, T = 5, C = 8, NH = 2;
  const Tensor qkv = widened(random_f32(B * T * 3 * C, 12)), dout = random_f32(B * T * C, 13);
  Tensor att = Tensor::empty({B * NH * T * T}), scratch = Tensor::empty({T * T});
  Tensor ref = Tensor::empty({B * T * C}), out16 = Tensor::empty({B * T * C}, DType::bf16);
  const Tensor q = qkv.reshape({B, T, 3 * C}), q16 = to_bf16(qkv).reshape({B, T, 3 * C});
  ops::attention_forward(ref, att, q, NH);
  ops::attention_forward(out16, att, q16, NH);
  expect_rounded_equal(out16, ref, "attention output");
  Tensor dref = Tensor::empty({B * T * 3 * C}), d16 = Tensor::empty({B * T * 3 * C}, DType::bf16);
  ops::attention_backward(dref, scratch, dout, q, ref, att, NH);
  ops::attention_backward(d16, scratch, dout, q16, out16, att, NH);
  expect_rounded_equal(d16, dref, "qkv gradient");
}

// The tiled kernel at one tile (T <= 64) reads bf16 qkv and the forward's
// bf16 output where they are and writes bf16 where asked, with f32 or bf16
// products: the bits of the f32 tensors' run, rounded.
TEST(MixedPrecisionOps, OneTileAttentionReadsAndWritesBf16WhereItIs) {
  constexpr int64_t B = 3, T = 37, NH = 4, NKV = 2, hs = 12, C = NH * hs, C3 = (NH + 2 * NKV) * hs;
  const auto tiled = ops::AttentionKernel::tiled;
  for (bool products16 : {false, true}) {
    std::optional<testing::ScopedBf16Products> scoped;
    if (products16) scoped.emplace();
    if (products16 && !cpu::bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
    const Tensor qkv = widened(random_f32(B * T * C3, 40)).reshape({B, T, C3}), dout = random_f32(B * T * C, 41);
    const Tensor q16 = to_bf16(qkv).reshape({B, T, C3});
    Tensor lse = Tensor::empty({B * NH * T}), lse16 = Tensor::empty({B * NH * T});
    Tensor scratch = Tensor::empty({ops::attention_scratch_floats(tiled, Device::cpu(), B, T, C, NH)});
    Tensor ref = Tensor::empty({B * T * C}), out16 = Tensor::empty({B * T * C}, DType::bf16);
    ops::attention_forward(ref, lse, qkv, NH, tiled, NKV);
    ops::attention_forward(out16, lse16, q16, NH, tiled, NKV);
    expect_rounded_equal(out16, ref, products16 ? "output, bf16 products" : "output, f32 products");
    expect_equal(lse16, lse, "log-sum-exp");
    // The backward reads the output it is given: the reference gets the
    // same values in f32.
    Tensor dref = Tensor::empty({B * T * C3}), d16 = Tensor::empty({B * T * C3}, DType::bf16);
    ops::attention_backward(dref, scratch, dout, qkv, to_f32(out16), lse, NH, tiled, NKV);
    ops::attention_backward(d16, scratch, dout, q16, out16, lse, NH, tiled, NKV);
    expect_rounded_equal(d16, dref, products16 ? "qkv gradient, bf16 products" : "qkv gradient, f32 products");
  }
}

// With bf16 products the one-tile kernel rounds the products' operands
// where gemm_batched() would: q, k and v, and the probabilities before
// they weight v. A reference in double with exactly those roundings is
// within f32's error of it; one without the probabilities' rounding is not.
TEST(MixedPrecisionOps, OneTileAttentionRoundsTheProbabilitiesForTheirProduct) {
  const testing::ScopedBf16Products bf16_products;
  if (!cpu::bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  constexpr int64_t B = 2, T = 29, NH = 2, hs = 16, C = NH * hs, C3 = 3 * C;
  const Tensor qkv = widened(random_f32(B * T * C3, 42, 2.0f)).reshape({B, T, C3});
  Tensor lse = Tensor::empty({B * NH * T}), out = Tensor::empty({B * T * C});
  ops::attention_forward(out, lse, qkv, NH, ops::AttentionKernel::tiled);
  const float* x = qkv.f32();
  double worst_rounded = 0.0, worst_exact = 0.0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        auto at = [&](int64_t pos, int64_t col) { return double(x[(b * T + pos) * C3 + col]); };
        std::vector<double> p(size_t(t + 1));
        double m = -1e300, sum = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0.0;
          for (int64_t i = 0; i < hs; ++i) d += at(t, h * hs + i) * at(j, C + h * hs + i);
          p[size_t(j)] = d / std::sqrt(double(hs));
          m = std::max(m, p[size_t(j)]);
        }
        for (double& v : p) sum += (v = std::exp(v - m));
        for (int64_t i = 0; i < hs; ++i) {
          double rounded = 0.0, exact = 0.0;
          for (int64_t j = 0; j <= t; ++j) {
            const double pj = p[size_t(j)] / sum, v = at(j, 2 * C + h * hs + i);
            rounded += double(shardtrain::to_f32(shardtrain::to_bf16(float(pj)))) * v;
            exact += pj * v;
          }
          const double got = out.f32()[(b * T + t) * C + h * hs + i];
          worst_rounded = std::max(worst_rounded, std::fabs(got - rounded));
          worst_exact = std::max(worst_exact, std::fabs(got - exact));
        }
      }
  EXPECT_LT(worst_rounded, 2e-5) << "with the roundings";
  EXPECT_GT(worst_exact, 1e-4) << "without the probabilities' rounding";
}

// Row-wise ops on bf16 tensors run a chunk of rows at a time through f32
// buffers of their own: over several chunks and a shorter last one, the
// bits of the f32 op on the widened inputs, rounded.
TEST(MixedPrecisionOps, RowOpsOnBf16InChunksAreTheRoundedF32Ops) {
  constexpr int64_t rows = 600, C = 1000, F = 700;
  // SwiGLU: 124 rows a chunk forward (gu and h widened), 87 backward.
  const Tensor gu = widened(random_f32(rows * 2 * F, 60, 3.0f)).reshape({rows, 2 * F});
  const Tensor dh = widened(random_f32(rows * F, 61)).reshape({rows, F});
  Tensor h = Tensor::empty({rows * F}), h16 = Tensor::empty({rows * F}, DType::bf16);
  ops::swiglu_forward(h, gu);
  ops::swiglu_forward(h16, to_bf16(gu).reshape({rows, 2 * F}));
  expect_rounded_equal(h16, h, "SwiGLU");
  Tensor dgu = Tensor::empty({rows * 2 * F}), dgu16 = Tensor::empty({rows * 2 * F}, DType::bf16);
  ops::swiglu_backward(dgu, dh, gu);
  ops::swiglu_backward(dgu16, to_bf16(dh).reshape({rows, F}), to_bf16(gu).reshape({rows, 2 * F}));
  expect_rounded_equal(dgu16, dgu, "SwiGLU backward");
  // The norms' outputs: 262 rows a chunk.
  const Tensor x = random_f32(rows * C, 62, 2.0f), r = random_f32(rows * C, 63, 2.0f), w = random_f32(C, 64);
  const Tensor b = random_f32(C, 65);
  Tensor mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  Tensor ref = Tensor::empty({rows * C}), out16 = Tensor::empty({rows * C}, DType::bf16);
  ops::layernorm_forward(ref, mean, rstd, x, w, b, 1e-5f);
  ops::layernorm_forward(out16, mean, rstd, x, w, b, 1e-5f);
  expect_rounded_equal(out16, ref, "layernorm");
  Tensor sum = Tensor::empty({rows * C});
  ops::residual_layernorm_forward(sum, out16, mean, rstd, x, r, w, b, 1e-5f);
  ops::residual_layernorm_forward(sum, ref, mean, rstd, x, r, w, b, 1e-5f);
  expect_rounded_equal(out16, ref, "residual layernorm");
  ops::rmsnorm_forward(ref, rstd, x, w, 1e-5f);
  ops::rmsnorm_forward(out16, rstd, x, w, 1e-5f);
  expect_rounded_equal(out16, ref, "RMSNorm");
  ops::residual_rmsnorm_forward(sum, out16, rstd, x, r, w, 1e-5f);
  ops::residual_rmsnorm_forward(sum, ref, rstd, x, r, w, 1e-5f);
  expect_rounded_equal(out16, ref, "residual RMSNorm");
  // RoPE in place, whole sequences a chunk: 256 of 16 x 64 floats, and one
  // of 80 x 4096 (wider than a chunk's budget: a buffer of its own).
  for (const auto [B, T, W] : {std::array<int64_t, 3>{600, 16, 64}, std::array<int64_t, 3>{3, 80, 4096}}) {
    const Tensor q = widened(random_f32(B * T * W, 66)).reshape({B, T, W});
    Tensor q32 = Tensor::empty({B * T * W});
    std::memcpy(q32.f32(), q.f32(), q.nbytes());
    const Tensor q16 = to_bf16(q).reshape({B, T, W});
    ops::rope_forward(q32.reshape({B, T, W}), 3, 16, 10000.0f);
    ops::rope_forward(q16, 3, 16, 10000.0f);
    expect_rounded_equal(q16.reshape({B * T * W}), q32, "RoPE");
  }
}

// With bf16 products a linear layer's bf16 input gradient through the GELU
// comes a chunk of rows at a time (its product and the GELU's backward in
// L2): the bits of the whole f32 gradient, rounded.
TEST(MixedPrecisionOps, LinearBf16InputGradientInChunksIsTheRoundedF32One) {
  const testing::ScopedBf16Products bf16_products;
  if (!cpu::bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  constexpr int64_t rows = 500, ic = 700, oc = 40;  // 187 rows a chunk
  const Tensor x = widened(random_f32(rows * ic, 70)).reshape({rows, ic}), w = random_f32(oc * ic, 71, 0.3f);
  const Tensor dout = widened(random_f32(rows * oc, 72)), pre = widened(random_f32(rows * ic, 73));
  Tensor din = Tensor::empty({rows * ic}), dw = Tensor::empty({oc * ic}), db = Tensor::empty({oc});
  Tensor din16 = Tensor::empty({rows * ic}, DType::bf16), dw16 = Tensor::empty({oc * ic}), db16 = Tensor::empty({oc});
  const Tensor wm = w.reshape({oc, ic});
  ops::linear_backward_through_gelu(din, dw, db, dout, x, wm, pre, false);
  ops::linear_backward_through_gelu(din16, dw16, db16, to_bf16(dout), to_bf16(x).reshape({rows, ic}), wm, to_bf16(pre),
                                    false);
  expect_rounded_equal(din16, din, "input gradient through the GELU");
  expect_equal(dw16, dw, "weight gradient");
  expect_equal(db16, db, "bias gradient");
}

TEST(MixedPrecisionOps, LossOnBf16LogitsWritesTheRoundedGradientOverThem) {
  constexpr int64_t C = 50;
  const Tensor logits = widened(random_f32(N * C, 14, 4.0f)).reshape({N, C});
  Tensor labels = Tensor::empty({N}, DType::i32);
  std::vector<int32_t> host(N);
  for (int64_t i = 0; i < N; ++i) labels.i32()[i] = host[size_t(i)] = int32_t((i * 7) % C);
  Tensor ref = widened(logits).reshape({N, C}), loss_ref = Tensor::empty({N}), loss = Tensor::empty({N});
  ops::softmax_xent_fused_rows(ref, ref, labels, 0.25f, loss_ref);
  Tensor in_place = to_bf16(logits).reshape({N, C});
  EXPECT_EQ(ops::count_correct(in_place, host.data()), ops::count_correct(logits, host.data()));
  EXPECT_EQ(ops::softmax_xent_forward(in_place, host.data()), ops::softmax_xent_forward(logits, host.data()));
  ops::softmax_xent_fused_rows(in_place, in_place, labels, 0.25f, loss);
  expect_rounded_equal(in_place, ref, "logit gradient, in place");
  expect_equal(loss, loss_ref, "row losses (f32)");
  Tensor again = to_bf16(logits).reshape({N, C});
  EXPECT_EQ(ops::softmax_xent_fused(again, again, host.data(), 0.25f),
            ops::softmax_xent_fused(widened(logits).reshape({N, C}), logits, host.data(), 0.25f));
  expect_rounded_equal(again, ref, "logit gradient, host labels");
  EXPECT_THAT(error_of([&] { ops::softmax_xent_fused_rows(ref, in_place, labels, 1.0f, loss); }),
              HasSubstr("softmax_xent_rows: logits of bf16 and their gradient of f32"));
}

TEST(MixedPrecisionOps, WrongTypesAreErrorsNamingTheOp) {
  const Tensor w = random_f32(OC * IC, 2).reshape({OC, IC});
  Tensor ids = Tensor::zeros({N * IC}, DType::i32), out = Tensor::empty({N * OC});
  EXPECT_THAT(error_of([&] {
                ops::linear_forward(out, ids.reshape({N, IC}), w, Tensor());
              }),
              HasSubstr("linear_forward: the input holds i32, not f32 or bf16"));
  Tensor pre = Tensor::empty({N * OC}), out16 = Tensor::empty({N * OC}, DType::bf16);
  const Tensor x = random_f32(N * IC, 1).reshape({N, IC});
  EXPECT_THAT(error_of([&] { ops::linear_gelu_forward(out16, pre, x, w, Tensor()); }),
              HasSubstr("linear_gelu_forward: the GELU's input and output differ in type (f32 and bf16)"));
  // The LayerNorm's input is the f32 residual stream.
  Tensor ln_w = random_f32(IC, 3), ln_b = random_f32(IC, 4), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
  EXPECT_THAT(
      error_of([&] { ops::layernorm_forward(Tensor::empty({N * IC}), mean, rstd, to_bf16(x), ln_w, ln_b, 1e-5f); }),
      HasSubstr("not f32"));
}

}  // namespace
}  // namespace shardtrain
