// Max pooling on the GPU, NCHW, square window K with stride S, no padding
// (device pointers, compute stream), with the semantics of kernels/cpu/pool.h:
// forward records the arg-max (index within the H*W plane, the first maximum
// in row-by-row scan order on ties); backward overwrites din, each input pixel
// gathering, in output order, the gradients of the windows whose arg-max it
// is (any stride, overlapping windows included; deterministic).
#pragma once

#include "kernels/cpu/pool.h"

#include <cstdint>

namespace shardtrain::cuda {

// out[B, C, OH, OW], argmax[B, C, OH, OW].
void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const cpu::Pool2dShape& s);
// din[B, C, H, W] is overwritten.
void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax, const cpu::Pool2dShape& s);

}  // namespace shardtrain::cuda
