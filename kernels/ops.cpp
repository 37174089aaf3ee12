#include "kernels/ops.h"

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/linear.h"
#include "runtime/core/error.h"

namespace shardtrain::ops {
namespace {

// Every op runs where its first tensor lives; all defined tensors must agree.
// Only the CPU path exists until the CUDA backend registers its kernels.
void require_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t->defined() && !t->device().is_cpu())
      throw Error(fmt::format("{}: tensor on {} but this build runs {} on the CPU only", op,
                              t->device().str(), op));
  }
}

void require_numel(const char* op, const Tensor& t, int64_t n, const char* what) {
  ST_CHECK(t.numel() == n, "{}: {} has {} elements, expected {} (shape {})", op, what, t.numel(), n,
           t.shape().str());
}

float* opt(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }

}  // namespace

void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias) {
  require_cpu("linear_forward", {&out, &in, &weight, &bias});
  const int64_t OC = weight.dim(0), IC = weight.dim(1), N = in.numel() / IC;
  require_numel("linear_forward", in, N * IC, "input");
  require_numel("linear_forward", out, N * OC, "output");
  if (bias.defined()) require_numel("linear_forward", bias, OC, "bias");
  cpu::linear_forward(out.f32(), in.f32(), weight.f32(), opt(bias), N, IC, OC);
}

void linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias,
                     const Tensor& dout, const Tensor& in, const Tensor& weight, bool accumulate) {
  require_cpu("linear_backward", {&din, &dweight, &dbias, &dout, &in, &weight});
  const int64_t OC = weight.dim(0), IC = weight.dim(1), N = in.numel() / IC;
  require_numel("linear_backward", dout, N * OC, "output gradient");
  if (din.defined()) require_numel("linear_backward", din, N * IC, "input gradient");
  require_numel("linear_backward", dweight, OC * IC, "weight gradient");
  cpu::linear_backward(opt(din), dweight.f32(), opt(dbias), dout.f32(), in.f32(), weight.f32(), N,
                       IC, OC, accumulate);
}

void relu_forward(const Tensor& out, const Tensor& in) {
  require_cpu("relu_forward", {&out, &in});
  require_numel("relu_forward", out, in.numel(), "output");
  cpu::relu_forward(out.f32(), in.f32(), in.numel());
}

void relu_backward(const Tensor& din, const Tensor& dout, const Tensor& out) {
  require_cpu("relu_backward", {&din, &dout, &out});
  require_numel("relu_backward", din, out.numel(), "input gradient");
  require_numel("relu_backward", dout, out.numel(), "output gradient");
  cpu::relu_backward(din.f32(), dout.f32(), out.f32(), out.numel());
}

void gelu_forward(const Tensor& out, const Tensor& in) {
  require_cpu("gelu_forward", {&out, &in});
  require_numel("gelu_forward", out, in.numel(), "output");
  cpu::gelu_forward(out.f32(), in.f32(), in.numel());
}

void gelu_backward(const Tensor& din, const Tensor& dout, const Tensor& in) {
  require_cpu("gelu_backward", {&din, &dout, &in});
  require_numel("gelu_backward", din, in.numel(), "input gradient");
  require_numel("gelu_backward", dout, in.numel(), "output gradient");
  cpu::gelu_backward(din.f32(), dout.f32(), in.f32(), in.numel());
}

void conv2d_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias,
                    const Tensor& col, const cpu::Conv2dShape& s) {
  require_cpu("conv2d_forward", {&out, &in, &weight, &bias, &col});
  require_numel("conv2d_forward", in, s.B * s.C * s.H * s.W, "input");
  require_numel("conv2d_forward", out, s.B * s.OC * s.OH() * s.OW(), "output");
  require_numel("conv2d_forward", weight, s.OC * s.C * s.K * s.K, "weight");
  ST_CHECK(col.numel() >= s.col_floats(), "conv2d_forward: column workspace too small");
  cpu::conv2d_forward(out.f32(), in.f32(), weight.f32(), opt(bias), col.f32(), s);
}

void conv2d_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias,
                     const Tensor& dout, const Tensor& in, const Tensor& weight, const Tensor& col,
                     const cpu::Conv2dShape& s, bool accumulate) {
  require_cpu("conv2d_backward", {&din, &dweight, &dbias, &dout, &in, &weight, &col});
  require_numel("conv2d_backward", dout, s.B * s.OC * s.OH() * s.OW(), "output gradient");
  if (din.defined()) require_numel("conv2d_backward", din, s.B * s.C * s.H * s.W, "input gradient");
  ST_CHECK(col.numel() >= s.col_floats(), "conv2d_backward: column workspace too small");
  cpu::conv2d_backward(opt(din), dweight.f32(), opt(dbias), dout.f32(), in.f32(), weight.f32(),
                       col.f32(), s, accumulate);
}

void maxpool2d_forward(const Tensor& out, const Tensor& argmax, const Tensor& in,
                       const cpu::Pool2dShape& s) {
  require_cpu("maxpool2d_forward", {&out, &argmax, &in});
  require_numel("maxpool2d_forward", in, s.B * s.C * s.H * s.W, "input");
  require_numel("maxpool2d_forward", out, s.B * s.C * s.OH() * s.OW(), "output");
  require_numel("maxpool2d_forward", argmax, out.numel(), "arg-max indices");
  cpu::maxpool2d_forward(out.f32(), argmax.i32(), in.f32(), s);
}

void maxpool2d_backward(const Tensor& din, const Tensor& dout, const Tensor& argmax,
                        const cpu::Pool2dShape& s) {
  require_cpu("maxpool2d_backward", {&din, &dout, &argmax});
  require_numel("maxpool2d_backward", din, s.B * s.C * s.H * s.W, "input gradient");
  require_numel("maxpool2d_backward", argmax, dout.numel(), "arg-max indices");
  cpu::maxpool2d_backward(din.f32(), dout.f32(), argmax.i32(), s);
}

double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const int32_t* labels,
                          float scale) {
  require_cpu("softmax_xent", {&dlogits, &logits});
  require_numel("softmax_xent", dlogits, logits.numel(), "logit gradient");
  return cpu::softmax_xent_fused(dlogits.f32(), logits.f32(), labels, logits.shape().rows(),
                                 logits.shape().cols(), scale);
}

double softmax_xent_forward(const Tensor& logits, const int32_t* labels) {
  require_cpu("softmax_xent", {&logits});
  return cpu::softmax_xent_forward(logits.f32(), labels, logits.shape().rows(),
                                   logits.shape().cols(), nullptr);
}

int64_t count_correct(const Tensor& logits, const int32_t* labels) {
  require_cpu("count_correct", {&logits});
  return cpu::count_correct(logits.f32(), labels, logits.shape().rows(), logits.shape().cols());
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                const cpu::SgdParams& hp, bool first_step) {
  require_cpu("sgd_update", {&param, &grad, &momentum_buf});
  require_numel("sgd_update", grad, param.numel(), "gradient");
  if (momentum_buf.defined()) require_numel("sgd_update", momentum_buf, param.numel(), "momentum");
  cpu::sgd_update(param.f32(), grad.f32(), opt(momentum_buf), param.numel(), hp, first_step);
}

void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const cpu::AdamWParams& hp, int64_t step) {
  require_cpu("adamw_update", {&param, &grad, &m, &v});
  require_numel("adamw_update", grad, param.numel(), "gradient");
  require_numel("adamw_update", m, param.numel(), "first moment");
  require_numel("adamw_update", v, param.numel(), "second moment");
  cpu::adamw_update(param.f32(), grad.f32(), m.f32(), v.f32(), param.numel(), hp, step);
}

double sum_squares(const Tensor& x) {
  require_cpu("sum_squares", {&x});
  return cpu::sum_squares(x.f32(), x.numel());
}

void scale_inplace(const Tensor& x, float s) {
  require_cpu("scale", {&x});
  cpu::scale_inplace(x.f32(), x.numel(), s);
}

}  // namespace shardtrain::ops
