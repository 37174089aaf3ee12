// 2-D convolution, NCHW, square kernel: through oneDNN's direct kernels where
// onednn_conv_route() says so (onednn_conv.h), else by im2col + GEMM, one
// sample at a time (the column buffer of one sample stays in cache).
// weight [OC, C*K*K], bias [OC].
#pragma once

#include "kernels/kernel_params.h"

#include <cstdint>

namespace shardtrain::cpu {

using kernels::Conv2dShape;

// col[C*K*K, OH*OW] from one sample's image[C, H, W]; zero where padding.
void im2col(float* col, const float* image, const Conv2dShape& s);
// image[C, H, W] = sum of col entries that map to each pixel (overwrites image).
void col2im(float* image, const float* col, const Conv2dShape& s);

// Tests: which row copies im2col/col2im use at stride 1, 2 AVX-512, 1 AVX2,
// 0 portable (capped at what the CPU has; the default). Returns the one before.
int set_conv_row_isa(int isa);

// out[B, OC, OH, OW]; col is a workspace of s.col_floats() floats.
void conv2d_forward(float* out, const float* in, const float* weight, const float* bias, float* col,
                    const Conv2dShape& s);

// din (may be null) is overwritten; dweight/dbias overwritten, or added to
// when accumulate. col is a workspace of s.col_floats() floats.
void conv2d_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     float* col, const Conv2dShape& s, bool accumulate);

}  // namespace shardtrain::cpu
