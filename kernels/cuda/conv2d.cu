#include "kernels/cuda/conv2d.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm.h"

#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;

// The plain-old-data shape the kernels take (Conv2dShape's methods are host-only).
struct Geometry {
  int64_t C, H, W, K, stride, pad, OH, OW;
};

Geometry geometry(const Conv2dShape& s) {
  return {s.C, s.H, s.W, s.K, s.stride, s.pad, s.OH(), s.OW()};
}

// A 1x1 kernel with stride 1 and no padding has col == image: skip the copy.
bool col_is_image(const Conv2dShape& s) { return s.K == 1 && s.stride == 1 && s.pad == 0; }

void check_shape(const char* fn, const Conv2dShape& s) {
  ST_CUDA_REQUIRE(s.B >= 0 && s.C > 0 && s.H > 0 && s.W > 0 && s.OC > 0 && s.K > 0 &&
                      s.stride > 0 && s.pad >= 0 && s.H + 2 * s.pad >= s.K &&
                      s.W + 2 * s.pad >= s.K,
                  std::string(fn) + ": bad shape B=" + std::to_string(s.B) +
                      " C=" + std::to_string(s.C) + " H=" + std::to_string(s.H) +
                      " W=" + std::to_string(s.W) + " OC=" + std::to_string(s.OC) +
                      " K=" + std::to_string(s.K) + " stride=" + std::to_string(s.stride) +
                      " pad=" + std::to_string(s.pad));
}

// One thread per col entry (c, ki, kj, oh, ow): the pixel that output sees
// through that tap, or 0 in the padding.
__global__ void im2col_kernel(float* col, const float* image, Geometry g) {
  const int64_t P = g.OH * g.OW, total = g.C * g.K * g.K * P;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, row = i / P;
    const int64_t kj = row % g.K, ki = (row / g.K) % g.K, c = row / (g.K * g.K);
    const int64_t ih = oh * g.stride - g.pad + ki, iw = ow * g.stride - g.pad + kj;
    col[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? image[(c * g.H + ih) * g.W + iw]
                                                          : 0.0f;
  }
}

// One thread per pixel (c, ih, iw): the sum, in (ki, kj) order, of the col
// entries im2col copied from it (the taps with ih = oh*stride - pad + ki for
// an output row oh in range, likewise for columns). Overwrites the image.
__global__ void col2im_kernel(float* image, const float* col, Geometry g) {
  const int64_t P = g.OH * g.OW, total = g.C * g.H * g.W;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t iw = i % g.W, ih = (i / g.W) % g.H, c = i / (g.H * g.W);
    float acc = 0.0f;
    for (int64_t ki = 0; ki < g.K; ++ki) {
      const int64_t y = ih + g.pad - ki;  // = oh * stride
      if (y < 0 || y % g.stride != 0 || y / g.stride >= g.OH) continue;
      const int64_t oh = y / g.stride;
      for (int64_t kj = 0; kj < g.K; ++kj) {
        const int64_t x = iw + g.pad - kj;  // = ow * stride
        if (x < 0 || x % g.stride != 0 || x / g.stride >= g.OW) continue;
        const int64_t ow = x / g.stride;
        acc += col[((c * g.K + ki) * g.K + kj) * P + oh * g.OW + ow];
      }
    }
    image[i] = acc;
  }
}

// out[b, oc, :] = bias[oc] over all samples (the per-sample GEMMs add on top).
__global__ void fill_bias_planes_kernel(float* out, const float* bias, int64_t B, int64_t OC,
                                        int64_t P) {
  const int64_t total = B * OC * P;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = bias[(i / P) % OC];
}

// One block per output channel: dbias[oc] (+)= sum_b sum_p dout[b, oc, p].
// Each sample's plane is summed by a fixed-shape tree (strided per-thread
// partials, then a shared-memory halving), and the samples are added in
// order, as the CPU does sample by sample: deterministic.
__global__ void conv_bias_grad_kernel(float* dbias, const float* dout, int64_t B, int64_t OC,
                                      int64_t P, bool accumulate) {
  __shared__ float sh[kThreads];
  const int64_t oc = blockIdx.x;
  float total = accumulate ? dbias[oc] : 0.0f;
  for (int64_t b = 0; b < B; ++b) {
    const float* plane = dout + (b * OC + oc) * P;
    float part = 0.0f;
    for (int64_t p = threadIdx.x; p < P; p += kThreads) part += plane[p];
    sh[threadIdx.x] = part;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (int(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
      __syncthreads();
    }
    total += sh[0];  // every thread keeps the same running total
    __syncthreads();  // before the next sample overwrites sh
  }
  if (threadIdx.x == 0) dbias[oc] = total;
}

}  // namespace

void im2col(float* col, const float* image, const Conv2dShape& s) {
  check_shape("cuda::im2col", s);
  const int64_t n = s.col_floats();
  im2col_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(col, image, geometry(s));
  ST_CUDA_CHECK_LAUNCH("im2col_kernel");
}

void col2im(float* image, const float* col, const Conv2dShape& s) {
  check_shape("cuda::col2im", s);
  const int64_t n = s.C * s.H * s.W;
  col2im_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(image, col, geometry(s));
  ST_CUDA_CHECK_LAUNCH("col2im_kernel");
}

// One im2col and one GEMM per sample: the caller's col workspace holds one
// sample. (A batched im2col into a B-sample workspace and one strided-batched
// GEMM would cut the launches from 2B to 2.)
void conv2d_forward(float* out, const float* in, const float* weight, const float* bias, float* col,
                    const Conv2dShape& s) {
  check_shape("cuda::conv2d_forward", s);
  const int64_t P = s.OH() * s.OW(), CKK = s.C * s.K * s.K;
  if (s.B == 0) return;
  // Bias fused as in linear: planes start at bias[oc], the GEMMs add on top.
  if (bias != nullptr) {
    const int64_t n = s.B * s.OC * P;
    fill_bias_planes_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(
        out, bias, s.B, s.OC, P);
    ST_CUDA_CHECK_LAUNCH("fill_bias_planes_kernel");
  }
  for (int64_t b = 0; b < s.B; ++b) {
    const float* image = in + b * s.C * s.H * s.W;
    const float* cols = image;
    if (!col_is_image(s)) {
      cuda::im2col(col, image, s);
      cols = col;
    }
    // out_b[OC, P] = W[OC, CKK] * col[CKK, P]
    gemm(false, false, s.OC, P, CKK, 1.0f, weight, CKK, cols, P, bias != nullptr ? 1.0f : 0.0f,
         out + b * s.OC * P, P);
  }
}

void conv2d_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                     const float* weight, float* col, const Conv2dShape& s, bool accumulate) {
  check_shape("cuda::conv2d_backward", s);
  const int64_t P = s.OH() * s.OW(), CKK = s.C * s.K * s.K, image_size = s.C * s.H * s.W;
  if (s.B == 0 && !accumulate)  // no samples: the sums are empty
    ST_CUDA_CHECK(cudaMemsetAsync(dweight, 0, size_t(s.OC * CKK) * sizeof(float),
                                  compute_stream()));
  // dbias for all samples in one launch (it reads dout only).
  if (dbias != nullptr) {
    conv_bias_grad_kernel<<<unsigned(s.OC), kThreads, 0, compute_stream()>>>(dbias, dout, s.B,
                                                                             s.OC, P, accumulate);
    ST_CUDA_CHECK_LAUNCH("conv_bias_grad_kernel");
  }
  for (int64_t b = 0; b < s.B; ++b) {
    const float* image = in + b * image_size;
    const float* g = dout + b * s.OC * P;
    // The first sample overwrites (beta 0) unless accumulating: no zeroing pass.
    const bool overwrite = b == 0 && !accumulate;
    const float* cols = image;
    if (!col_is_image(s)) {
      cuda::im2col(col, image, s);
      cols = col;
    }
    // dW[OC, CKK] (+)= dout_b[OC, P] * col[CKK, P]^T
    gemm(false, true, s.OC, CKK, P, 1.0f, g, P, cols, P, overwrite ? 0.0f : 1.0f, dweight, CKK);
    if (din == nullptr) continue;
    // dcol[CKK, P] = W^T * dout_b, then gathered back onto the image. col is
    // free again (the dW GEMM above, earlier on the same stream, was its last
    // reader), so it holds dcol.
    float* dimage = din + b * image_size;
    if (col_is_image(s)) {
      gemm(true, false, CKK, P, s.OC, 1.0f, weight, CKK, g, P, 0.0f, dimage, P);
    } else {
      gemm(true, false, CKK, P, s.OC, 1.0f, weight, CKK, g, P, 0.0f, col, P);
      cuda::col2im(dimage, col, s);
    }
  }
}

}  // namespace shardtrain::cuda
