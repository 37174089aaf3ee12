// Max pooling, NCHW, square window K with stride S, no padding. Forward
// records the arg-max input offset of every output (within its channel plane),
// so backward is a scatter.
#pragma once

#include "kernels/kernel_params.h"

#include <cstdint>

namespace shardtrain::cpu {

using kernels::Pool2dShape;

// out[B, C, OH, OW], argmax[B, C, OH, OW] (index into the H*W plane; first max on ties).
void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const Pool2dShape& s);
// din[B, C, H, W] is overwritten. For a 2x2/2 window an argmax of -1 gives
// no pixel of its window gradient (a ReLU after the pool that zeroed it:
// maxpool_2x2_from_channel_blocks with `relu`).
void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax, const Pool2dShape& s);

// Where a tensor [B, C, H, W] whose channels lie innermost in blocks of 16
// keeps element (n, c, h, w): n * sample + (c / 16) * block + (h * W + w) *
// pixel + c % 16 floats in. NHWC (C a multiple of 16) and oneDNN's nChw16c
// are both of this form: the layouts its convolutions write.
struct ChannelBlocks16 {
  int64_t sample, block, pixel;
};
// maxpool2d_forward's 2x2/2 window on such a tensor (H and W even, C a
// multiple of 16), into NCHW out and argmax: the same bits and indices as
// maxpool2d_forward of its NCHW copy, without making that copy. With
// `relu`, also the ReLU after the pool: out = max(m, 0), and argmax -1
// where m is not above 0, so that maxpool2d_backward gives that window no
// gradient, as the ReLU's backward then the pool's would (the same bits).
void maxpool_2x2_from_channel_blocks(float* out, int32_t* argmax, const float* in, const Pool2dShape& s,
                                     const ChannelBlocks16& layout, bool relu = false);

// Tests: whether the 2x2 forward and backward may use their AVX-512 rows
// (where the CPU has them; the default) or only the portable loops. Returns
// the setting before.
bool set_maxpool_avx512(bool on);

}  // namespace shardtrain::cpu
