// The kernel interface the layers call: Tensor in, Tensor out. Each op checks
// shapes, dtypes and that all tensors share one device, then runs the CPU
// kernel (kernels/cpu) or, for CUDA tensors, the CUDA kernel (kernels/cuda,
// added by the GPU backend). Layers never see which one ran.
//
// Conventions (as in kernels/cpu): an input-gradient tensor that is not
// defined() is skipped; parameter gradients are overwritten, or added to when
// `accumulate` (gradient accumulation).
#pragma once

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/optimizer_update.h"
#include "kernels/cpu/pool.h"
#include "runtime/core/tensor.h"

#include <cstdint>

namespace shardtrain::ops {

// x: [..., IC] viewed as [rows, IC]; weight [OC, IC]; bias [OC]; out [..., OC].
void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias,
                     const Tensor& dout, const Tensor& in, const Tensor& weight, bool accumulate);

void relu_forward(const Tensor& out, const Tensor& in);
void relu_backward(const Tensor& din, const Tensor& dout, const Tensor& out);
void gelu_forward(const Tensor& out, const Tensor& in);
void gelu_backward(const Tensor& din, const Tensor& dout, const Tensor& in);

// in [B, C, H, W]; weight [OC, C*K*K]; out [B, OC, OH, OW]; col: workspace of
// at least s.col_floats() floats.
void conv2d_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias,
                    const Tensor& col, const cpu::Conv2dShape& s);
void conv2d_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias,
                     const Tensor& dout, const Tensor& in, const Tensor& weight, const Tensor& col,
                     const cpu::Conv2dShape& s, bool accumulate);

// argmax: i32, out's numel.
void maxpool2d_forward(const Tensor& out, const Tensor& argmax, const Tensor& in,
                       const cpu::Pool2dShape& s);
void maxpool2d_backward(const Tensor& din, const Tensor& dout, const Tensor& argmax,
                        const cpu::Pool2dShape& s);

// logits [N, C]; labels on the host, N of them. Returns the summed loss;
// dlogits = scale * (softmax - onehot).
double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const int32_t* labels,
                          float scale);
double softmax_xent_forward(const Tensor& logits, const int32_t* labels);
int64_t count_correct(const Tensor& logits, const int32_t* labels);

// Optimizer updates over equal-length flat ranges.
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                const cpu::SgdParams& hp, bool first_step);
void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const cpu::AdamWParams& hp, int64_t step);

double sum_squares(const Tensor& x);
void scale_inplace(const Tensor& x, float s);

}  // namespace shardtrain::ops
