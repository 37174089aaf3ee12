#include "kernels/cuda/pool.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output: the window scanned row by row, strict '>' (the
// first maximum wins), as the CPU.
__global__ void maxpool_forward_kernel(float* out, int32_t* argmax, const float* in, int64_t planes, int64_t H,
                                       int64_t W, int64_t K, int64_t S, int64_t OH, int64_t OW) {
  const int64_t total = planes * OH * OW;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t p = i / (OH * OW);
    const int64_t o = i - p * (OH * OW);
    const int64_t oh = o / OW, ow = o - oh * OW;
    const float* x = in + p * H * W;
    int64_t best = oh * S * W + ow * S;
    float best_value = x[best];
    for (int64_t ki = 0; ki < K; ++ki)
      for (int64_t kj = 0; kj < K; ++kj) {
        const int64_t idx = (oh * S + ki) * W + ow * S + kj;
        if (x[idx] > best_value) {
          best_value = x[idx];
          best = idx;
        }
      }
    out[i] = best_value;
    argmax[i] = int32_t(best);
  }
}

// One thread per input pixel (h, w): starts at 0 and adds, in output order
// (oh, ow ascending: the CPU's scatter order), the gradient of every window
// that covers the pixel and chose it as its arg-max.
__global__ void maxpool_backward_kernel(float* din, const float* dout, const int32_t* argmax, int64_t planes, int64_t H,
                                        int64_t W, int64_t K, int64_t S, int64_t OH, int64_t OW) {
  const int64_t total = planes * H * W;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t p = i / (H * W);
    const int64_t pix = i - p * (H * W);
    const int64_t h = pix / W, w = pix - h * W;
    // Windows oh with oh*S <= h < oh*S + K, and likewise for ow.
    const int64_t oh_lo = h < K ? 0 : (h - K) / S + 1;
    const int64_t oh_hi = h / S < OH - 1 ? h / S : OH - 1;
    const int64_t ow_lo = w < K ? 0 : (w - K) / S + 1;
    const int64_t ow_hi = w / S < OW - 1 ? w / S : OW - 1;
    const float* g = dout + p * OH * OW;
    const int32_t* a = argmax + p * OH * OW;
    float acc = 0.0f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow)
        if (int64_t(a[oh * OW + ow]) == pix) acc = __fadd_rn(acc, g[oh * OW + ow]);
    din[i] = acc;
  }
}

void check_shape(const cpu::Pool2dShape& s, const char* what) {
  ST_CUDA_REQUIRE(s.K >= 1 && s.stride >= 1 && s.H >= s.K && s.W >= s.K && s.H * s.W <= 0x7fffffffLL,
                  std::string(what) + ": window " + std::to_string(s.K) + " stride " + std::to_string(s.stride) +
                      " does not fit a " + std::to_string(s.H) + "x" + std::to_string(s.W) + " plane");
}

}  // namespace

void maxpool2d_forward(float* out, int32_t* argmax, const float* in, const cpu::Pool2dShape& s) {
  check_shape(s, "maxpool2d_forward");
  const int64_t planes = s.B * s.C, OH = s.OH(), OW = s.OW();
  const int64_t total = planes * OH * OW;
  if (total <= 0) return;
  maxpool_forward_kernel<<<grid_for(total, kThreads), kThreads, 0, compute_stream()>>>(out, argmax, in, planes, s.H,
                                                                                       s.W, s.K, s.stride, OH, OW);
  ST_CUDA_CHECK_LAUNCH("maxpool_forward_kernel");
}

void maxpool2d_backward(float* din, const float* dout, const int32_t* argmax, const cpu::Pool2dShape& s) {
  check_shape(s, "maxpool2d_backward");
  const int64_t planes = s.B * s.C, OH = s.OH(), OW = s.OW();
  const int64_t total = planes * s.H * s.W;
  if (total <= 0) return;
  maxpool_backward_kernel<<<grid_for(total, kThreads), kThreads, 0, compute_stream()>>>(din, dout, argmax, planes, s.H,
                                                                                        s.W, s.K, s.stride, OH, OW);
  ST_CUDA_CHECK_LAUNCH("maxpool_backward_kernel");
}

}  // namespace shardtrain::cuda
