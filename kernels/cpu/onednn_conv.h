// 2-D convolutions through oneDNN's direct kernels. oneDNN runs them in its
// blocked layouts (channels in blocks of 8 or 16), so each call reorders the
// NCHW input, the OIHW weight and the gradients into those layouts and the
// results back; the copies and oneDNN's scratchpads live in one buffer per
// thread, grown to the largest convolution's need and shared by all of them
// (the layers run one at a time), held outside the tensor accounting as the
// GPU's kernel workspaces are (onednn_conv_workspace_bytes). A batch goes to
// oneDNN in chunks of at most 128 samples, which bounds that buffer whatever
// the batch (an evaluation's can be thousands).
//
// conv2d.h's contract: out[B, OC, OH, OW], weight [OC, C, K, K], bias [OC];
// din overwritten, dweight and dbias overwritten or added to.
#pragma once

#include "kernels/kernel_params.h"

#include <cstddef>

namespace shardtrain::cpu {

// Which passes of this convolution run on oneDNN: those its primitive has a
// direct kernel for (not its own im2col + GEMM), only while
// onednn_convolutions(), and with bf16 products only where oneDNN has bf16
// kernels for this CPU (onednn_native_bf16: the operands go to oneDNN as
// bf16, the results come back in f32; elsewhere the im2col path rounds the
// operands as every product does). The backward's two passes go together.
struct OnednnConvRoute {
  bool forward = false, backward = false;
};
OnednnConvRoute onednn_conv_route(const kernels::Conv2dShape& s);

void onednn_conv_forward(float* out, const float* in, const float* weight, const float* bias,
                         const kernels::Conv2dShape& s);
// din may be null (no input gradient); dbias may be null.
void onednn_conv_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                          const float* weight, const kernels::Conv2dShape& s, bool accumulate);

// Whether onednn_conv_maxpool_forward takes this convolution: its forward
// runs on oneDNN, writes its channels innermost in blocks of 16 (NHWC with
// OC a multiple of 16, or nChw16c) and even planes.
bool onednn_conv_pools(const kernels::Conv2dShape& s);
// The convolution and the 2x2/2 max-pool after it: pooled [B, OC, OH/2,
// OW/2] and argmax as onednn_conv_forward then maxpool2d_forward give them,
// pooled straight from oneDNN's layout: the NCHW output is never made (its
// reorder would copy the largest activation once more). With `relu`, the
// ReLU after the pool too (maxpool_2x2_from_channel_blocks).
void onednn_conv_maxpool_forward(float* pooled, int32_t* argmax, const float* in, const float* weight,
                                 const float* bias, const kernels::Conv2dShape& s, bool relu = false);
// The forward alone, its output left in oneDNN's layout in this thread's
// buffer: a pooled forward's convolution, for bench step's replay.
void onednn_conv_forward_in_its_layout(const float* in, const float* weight, const float* bias,
                                       const kernels::Conv2dShape& s);

// Bytes the threads' oneDNN convolution buffers hold now.
size_t onednn_conv_workspace_bytes();

}  // namespace shardtrain::cpu
