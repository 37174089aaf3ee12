// Max pooling, NCHW, square window K with stride S, no padding. Forward
// records the arg-max input offset of every output (within its channel plane),
// so backward is a scatter.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

struct Pool2dShape {
  int64_t B, C, H, W;
  int64_t K = 2, stride = 2;
  int64_t OH() const { return (H - K) / stride + 1; }
  int64_t OW() const { return (W - K) / stride + 1; }
};

// out[B, C, OH, OW], argmax[B, C, OH, OW] (index into the H*W plane; first max on ties).
void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const Pool2dShape& s);
// din[B, C, H, W] is overwritten.
void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax, const Pool2dShape& s);

}  // namespace shardtrain::cpu
