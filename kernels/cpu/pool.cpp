#include "kernels/cpu/pool.h"

#include <algorithm>

namespace shardtrain::cpu {
namespace {

// The common 2x2 window with stride 2, one output row at a time: the
// compare-and-select chain over the four taps (in scan order, strict '>')
// vectorizes across the row, where the general loop below cannot.
void maxpool_2x2_row(float* __restrict o, int32_t* __restrict a, const float* __restrict x, int64_t oh, int64_t OW,
                     int64_t W) {
  const float* r0 = x + 2 * oh * W;
  const float* r1 = r0 + W;
  const int32_t base = int32_t(2 * oh * W);
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int32_t i0 = base + int32_t(2 * ow);
    float best = r0[2 * ow];
    int32_t idx = i0;
    const float v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
    idx = v1 > best ? i0 + 1 : idx;
    best = v1 > best ? v1 : best;
    idx = v2 > best ? i0 + int32_t(W) : idx;
    best = v2 > best ? v2 : best;
    idx = v3 > best ? i0 + int32_t(W) + 1 : idx;
    best = v3 > best ? v3 : best;
    o[ow] = best;
    a[ow] = idx;
  }
}

// Backward of one 2x2/2 output row: 2x2 windows tile the plane without
// overlap, so every covered pixel is written once (its gradient or 0)
// instead of zeroing the plane and scattering.
void maxpool_2x2_backward_row(float* __restrict dx, const float* __restrict g, const int32_t* __restrict a, int64_t oh,
                              int64_t OW, int64_t W) {
  float* r0 = dx + 2 * oh * W;
  float* r1 = r0 + W;
  const int32_t base = int32_t(2 * oh * W);
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int32_t i0 = base + int32_t(2 * ow), k = a[ow];
    const float gv = g[ow];
    r0[2 * ow] = k == i0 ? gv : 0.0f;
    r0[2 * ow + 1] = k == i0 + 1 ? gv : 0.0f;
    r1[2 * ow] = k == i0 + int32_t(W) ? gv : 0.0f;
    r1[2 * ow + 1] = k == i0 + int32_t(W) + 1 ? gv : 0.0f;
  }
}

}  // namespace

void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const Pool2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW(), plane = s.H * s.W;
  if (s.K == 2 && s.stride == 2) {
    for (int64_t p = 0; p < s.B * s.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        maxpool_2x2_row(out + (p * OH + oh) * OW, argmax + (p * OH + oh) * OW, in + p * plane, oh, OW, s.W);
    return;
  }
  for (int64_t p = 0; p < s.B * s.C; ++p) {
    const float* x = in + p * plane;
    float* o = out + p * OH * OW;
    int32_t* a = argmax + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        // Scan the window row by row; strict '>' keeps the first maximum, and
        // the selects compile to branch-free code.
        int64_t best = oh * s.stride * s.W + ow * s.stride;
        float best_value = x[best];
        for (int64_t ki = 0; ki < s.K; ++ki)
          for (int64_t kj = 0; kj < s.K; ++kj) {
            const int64_t idx = (oh * s.stride + ki) * s.W + ow * s.stride + kj;
            const bool better = x[idx] > best_value;
            best_value = better ? x[idx] : best_value;
            best = better ? idx : best;
          }
        o[oh * OW + ow] = best_value;
        a[oh * OW + ow] = int32_t(best);
      }
  }
}

void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax, const Pool2dShape& s) {
  // Only the arg-max of each window gets gradient; overlapping windows
  // (stride < K) may pick the same pixel, hence zero then add.
  const int64_t OH = s.OH(), OW = s.OW(), outputs = OH * OW, plane = s.H * s.W;
  if (s.K == 2 && s.stride == 2) {
    // Only an odd last row or column lies outside every window.
    if (s.H % 2 != 0 || s.W % 2 != 0) std::fill(din, din + s.B * s.C * plane, 0.0f);
    for (int64_t p = 0; p < s.B * s.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        maxpool_2x2_backward_row(din + p * plane, dout + (p * OH + oh) * OW, argmax + (p * OH + oh) * OW, oh, OW, s.W);
    return;
  }
  std::fill(din, din + s.B * s.C * plane, 0.0f);
  for (int64_t p = 0; p < s.B * s.C; ++p) {
    float* dx = din + p * plane;
    const float* g = dout + p * outputs;
    const int32_t* a = argmax + p * outputs;
    for (int64_t i = 0; i < outputs; ++i) dx[a[i]] += g[i];
  }
}

}  // namespace shardtrain::cpu
