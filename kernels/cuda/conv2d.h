// 2-D convolution on the GPU, NCHW, by im2col + GEMM: the contract of
// cpu::conv2d_forward / cpu::conv2d_backward (kernels/cpu/conv2d.h, whose
// Conv2dShape it shares). weight [OC, C*K*K], bias [OC]; device pointers,
// work on compute_stream().
#pragma once

#include "kernels/cpu/conv2d.h"

#include <cstdint>

namespace shardtrain::cuda {

// Conv2dShape is cpu::Conv2dShape, so an unqualified call with one finds the
// cpu:: overloads too (argument-dependent lookup): call these qualified.
using cpu::Conv2dShape;

// col[C*K*K, OH*OW] from one sample's image[C, H, W]; zero where padding.
void im2col(float* col, const float* image, const Conv2dShape& s);
// image[C, H, W] = sum of the col entries that map to each pixel (overwrites
// image). A gather, one thread per pixel: deterministic, no atomics.
void col2im(float* image, const float* col, const Conv2dShape& s);

// out[B, OC, OH, OW]; bias may be null. `col` (the CPU's one-sample
// workspace) is not used: the samples go in passes, each one im2col into a
// context scratch buffer and one strided-batched GEMM, instead of one of each
// per sample. A pass's workspace (cols, weight-gradient partials, their bf16
// copies) stays within set_conv_cols_limit bytes (128 MiB), or one sample's.
void conv2d_forward(float* out, const float* in, const float* weight, const float* bias, float* col,
                    const Conv2dShape& s);

// din (may be null) is overwritten; dweight/dbias (dbias may be null)
// overwritten, or added to when accumulate (the samples' weight gradients
// added in sample order). Passes as in forward.
void conv2d_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     float* col, const Conv2dShape& s, bool accumulate);

// The workspace limit of a pass in bytes (at least one sample per pass
// whatever it is); returns the one before. For tests of the multi-pass path.
int64_t set_conv_cols_limit(int64_t bytes);

}  // namespace shardtrain::cuda
