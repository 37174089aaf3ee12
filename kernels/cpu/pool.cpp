#include "kernels/cpu/pool.h"

#include <algorithm>

namespace shardtrain::cpu {

void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const Pool2dShape& s) {
  const int64_t OH = s.OH(), OW = s.OW(), plane = s.H * s.W;
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

void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax,
                        const Pool2dShape& s) {
  // Only the arg-max of each window gets gradient; overlapping windows
  // (stride < K) may pick the same pixel, hence zero then add.
  const int64_t outputs = s.OH() * s.OW(), plane = s.H * s.W;
  std::fill(din, din + s.B * s.C * plane, 0.0f);
  for (int64_t p = 0; p < s.B * s.C; ++p) {
    float* dx = din + p * plane;
    const float* g = dout + p * outputs;
    const int32_t* a = argmax + p * outputs;
    for (int64_t i = 0; i < outputs; ++i) dx[a[i]] += g[i];
  }
}

}  // namespace shardtrain::cpu
