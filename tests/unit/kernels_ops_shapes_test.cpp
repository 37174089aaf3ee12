// kernels/ops.h checks what it hands to a kernel: a window larger than its
// (padded) input, whose output-size formula truncates to 1 instead of
// failing, tensors of the wrong size and a kernel for the wrong device are
// Errors naming the op.
#include "kernels/ops.h"
#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

TEST(OpsShapes, AWindowLargerThanItsInputIsRefused) {
  // k5, stride 2, no padding on 4x4: (4 - 5) / 2 + 1 truncates to 1.
  const kernels::Conv2dShape conv{1, 1, 4, 4, 1, 5, 2, 0};
  ASSERT_EQ(conv.OH(), 1);
  Tensor in = Tensor::zeros({1, 1, 4, 4}), w = Tensor::zeros({1, 1, 5, 5}), out = Tensor::zeros({1, 1, 1, 1});
  Tensor col = Tensor::zeros({conv.col_floats()});
  EXPECT_THAT(error_of([&] { ops::conv2d_forward(out, in, w, Tensor(), col, conv); }),
              HasSubstr("conv2d_forward: kernel 5 (stride 2, padding 0) does not fit a 4x4 input"));
  // A 2x2 pool window on a 1x4 plane: OH truncates to 1 and the kernel read past the input.
  const kernels::Pool2dShape pool{1, 1, 1, 4, 2, 2};
  Tensor pin = Tensor::zeros({1, 1, 1, 4}), pout = Tensor::zeros({1, 1, 1, 2});
  Tensor arg = Tensor::empty({2}, DType::i32);
  EXPECT_THAT(error_of([&] { ops::maxpool2d_forward(pout, arg, pin, pool); }),
              HasSubstr("maxpool2d_forward: window 2 (stride 2) does not fit a 1x4 input"));
}

TEST(OpsShapes, GradientsOfTheWrongSizeAreRefused) {
  Tensor in = Tensor::zeros({2, 3}), w = Tensor::zeros({4, 3}), dout = Tensor::zeros({2, 4});
  Tensor dw = Tensor::zeros({4, 3}), db = Tensor::zeros({5});
  EXPECT_THAT(error_of([&] { ops::linear_backward(Tensor(), dw, db, dout, in, w, false); }),
              HasSubstr("linear_backward: bias gradient has 5 elements, expected 4"));
  const kernels::Conv2dShape conv{1, 1, 4, 4, 2, 3, 1, 1};
  Tensor cin = Tensor::zeros({1, 1, 4, 4}), cw = Tensor::zeros({2, 1, 3, 3}), cdout = Tensor::zeros({1, 2, 4, 4});
  Tensor cdw = Tensor::zeros({2, 1, 3, 2}), col = Tensor::zeros({conv.col_floats()});
  EXPECT_THAT(error_of([&] { ops::conv2d_backward(Tensor(), cdw, Tensor(), cdout, cin, cw, col, conv, false); }),
              HasSubstr("conv2d_backward: weight gradient has 12 elements, expected 18"));
  const kernels::Pool2dShape pool{1, 1, 4, 4, 2, 2};
  Tensor pdin = Tensor::zeros({1, 1, 4, 4}), pdout = Tensor::zeros({1, 1, 2, 3});
  Tensor arg = Tensor::empty({6}, DType::i32);
  EXPECT_THAT(error_of([&] { ops::maxpool2d_backward(pdin, pdout, arg, pool); }),
              HasSubstr("maxpool2d_backward: output gradient has 6 elements, expected 4"));
}

// The fused residual LayerNorm ops write one operand while reading another:
// the same tensor (a residual added in place) is allowed, a shifted overlap or
// an output on top of an input is not.
// On the CPU attention is tiled (a log-sum-exp per row kept, nothing of
// T x T), the materialized kernel is the reference, and the fused kernel
// (cuDNN) is refused rather than run on host memory.
TEST(OpsShapes, AttentionOnTheCpuIsTiled) {
  const int64_t B = 2, T = 8, C = 16, NH = 2;
  EXPECT_EQ(ops::attention_kernel(Device::cpu(), B, T, C, NH), ops::AttentionKernel::tiled);
  EXPECT_EQ(ops::attention_saved_floats(ops::AttentionKernel::tiled, B, T, C, NH), B * NH * T);
  EXPECT_EQ(ops::attention_saved_floats(ops::AttentionKernel::materialized, B, T, C, NH), B * NH * T * T);
  Tensor qkv = Tensor::zeros({B, T, 3 * C}), out = Tensor::zeros({B, T, C}), att = Tensor::zeros({B * NH * T * T});
  EXPECT_THAT(error_of([&] { ops::attention_forward(out, att, qkv, NH, ops::AttentionKernel::fused); }),
              HasSubstr("attention_forward: the fused kernel runs on a GPU only"));
  Tensor small = Tensor::zeros({B * NH * T * T - 1});
  EXPECT_THAT(error_of([&] { ops::attention_forward(out, small, qkv, NH); }),
              HasSubstr("attention_forward: saved-state buffer too small"));
}

// A linear layer keeps bf16 copies of its operands only where its products
// take bf16 operands; handing the kernels such a buffer on a CPU whose
// products are f32 is an Error.
TEST(OpsShapes, KeptBf16LinearCopiesNeedBf16Products) {
  EXPECT_FALSE(ops::linear_keeps_bf16(Device::cpu()));
  Tensor in = Tensor::zeros({4, 3}), w = Tensor::zeros({2, 3}), out = Tensor::zeros({4, 2});
  Tensor kept = Tensor::zeros({ops::linear_kept_elements(4, 3, 2)}, DType::bf16);
  EXPECT_THAT(error_of([&] { ops::linear_forward(out, in, w, Tensor(), kept); }),
              HasSubstr("linear_forward: bf16 copies are kept only where the products take bf16 operands"));
  Tensor dw = Tensor::zeros({2, 3});
  EXPECT_THAT(error_of([&] { ops::linear_backward(Tensor(), dw, Tensor(), out, in, w, false, kept); }),
              HasSubstr("linear_backward: bf16 copies are kept only where the products take bf16 operands"));
  EXPECT_THAT(error_of([&] { ops::linear_forward(out, in, w, Tensor(), Tensor(), /*keep_has_weight=*/true); }),
              HasSubstr("linear_forward: no kept buffer to hold the weight's copy"));
}

TEST(OpsShapes, FusedLayerNormAllowsInPlaceButRefusesOverlaps) {
  const int64_t N = 2, C = 4;
  Tensor buf = Tensor::zeros({3 * N * C}), b = Tensor::zeros({N, C}), ln = Tensor::zeros({N, C});
  Tensor w = Tensor::zeros({C}), bias = Tensor::zeros({C}), mean = Tensor::zeros({N}), rstd = Tensor::zeros({N});
  const Tensor a = buf.view(0, {N, C}), shifted = buf.view(2, {N, C});
  EXPECT_NO_THROW(ops::residual_layernorm_forward(a, ln, mean, rstd, a, b, w, bias, 1e-5f));
  EXPECT_NO_THROW(ops::residual_layernorm_forward(b, ln, mean, rstd, a, b, w, bias, 1e-5f));
  EXPECT_THAT(error_of([&] { ops::residual_layernorm_forward(shifted, ln, mean, rstd, a, b, w, bias, 1e-5f); }),
              HasSubstr("residual_layernorm_forward: the sum and the first operand overlap without being the same"));
  EXPECT_THAT(error_of([&] { ops::residual_layernorm_forward(a, a, mean, rstd, a, b, w, bias, 1e-5f); }),
              HasSubstr("residual_layernorm_forward: the output and the sum overlap"));
  EXPECT_THAT(error_of([&] { ops::residual_layernorm_forward(ln, b, mean, rstd, a, b, w, bias, 1e-5f); }),
              HasSubstr("residual_layernorm_forward: the output and the second operand overlap"));
  EXPECT_THAT(error_of([&] {
                ops::residual_layernorm_forward(ln, b.view(0, {N, C - 1}), mean, rstd, a, b, w, bias, 1e-5f);
              }),
              HasSubstr("residual_layernorm_forward: output has 6 elements, expected 8"));

  Tensor dout = Tensor::zeros({N, C}), dw = Tensor::zeros({C}), db = Tensor::zeros({C});
  EXPECT_NO_THROW(ops::layernorm_backward_add(a, dw, db, dout, b, w, mean, rstd, a, false));
  EXPECT_THAT(error_of([&] { ops::layernorm_backward_add(a, dw, db, dout, b, w, mean, rstd, shifted, false); }),
              HasSubstr("layernorm_backward_add: the input gradient and the residual gradient overlap without"));
  EXPECT_THAT(
      error_of([&] { ops::layernorm_backward_add(a, dw, db, dout, b, w, mean, rstd, Tensor::zeros({C}), true); }),
      HasSubstr("layernorm_backward_add: residual gradient has 4 elements, expected 8"));
}

}  // namespace
}  // namespace shardtrain
