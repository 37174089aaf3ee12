#include "kernels/cuda/conv2d.h"

#include "kernels/cuda/column_sum.h"
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

Geometry geometry(const Conv2dShape& s) { return {s.C, s.H, s.W, s.K, s.stride, s.pad, s.OH(), s.OW()}; }

// A 1x1 kernel with stride 1 and no padding has col == image: skip the copy.
bool col_is_image(const Conv2dShape& s) { return s.K == 1 && s.stride == 1 && s.pad == 0; }

void check_shape(const char* fn, const Conv2dShape& s) {
  ST_CUDA_REQUIRE(s.B >= 0 && s.C > 0 && s.H > 0 && s.W > 0 && s.OC > 0 && s.K > 0 && s.stride > 0 && s.pad >= 0 &&
                      s.H + 2 * s.pad >= s.K && s.W + 2 * s.pad >= s.K,
                  std::string(fn) + ": bad shape B=" + std::to_string(s.B) + " C=" + std::to_string(s.C) +
                      " H=" + std::to_string(s.H) + " W=" + std::to_string(s.W) + " OC=" + std::to_string(s.OC) +
                      " K=" + std::to_string(s.K) + " stride=" + std::to_string(s.stride) +
                      " pad=" + std::to_string(s.pad));
}

// One thread per col entry (b, c, ki, kj, oh, ow) of `batch` samples (their
// cols one after another): the pixel that output sees through that tap, or 0
// in the padding.
__global__ void im2col_kernel(float* col, const float* image, Geometry g, int64_t batch) {
  const int64_t P = g.OH * g.OW, per = g.C * g.K * g.K * P, total = batch * per;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / per, e = i - b * per;
    const int64_t ow = e % g.OW, oh = (e / g.OW) % g.OH, row = e / P;
    const int64_t kj = row % g.K, ki = (row / g.K) % g.K, c = row / (g.K * g.K);
    const int64_t ih = oh * g.stride - g.pad + ki, iw = ow * g.stride - g.pad + kj;
    const float* img = image + b * g.C * g.H * g.W;
    col[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? img[(c * g.H + ih) * g.W + iw] : 0.0f;
  }
}

// One thread per pixel (c, ih, iw): the sum, in (ki, kj) order, of the col
// entries im2col copied from it (the taps with ih = oh*stride - pad + ki for
// an output row oh in range, likewise for columns). Overwrites the image.
// Of `batch` samples: image b from col b.
__global__ void col2im_kernel(float* image, const float* col, Geometry g, int64_t batch) {
  const int64_t P = g.OH * g.OW, per = g.C * g.H * g.W, total = batch * per;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / per, e = i - b * per;
    const int64_t iw = e % g.W, ih = (e / g.W) % g.H, c = e / (g.H * g.W);
    const float* cb = col + b * g.C * g.K * g.K * P;
    float acc = 0.0f;
    for (int64_t ki = 0; ki < g.K; ++ki) {
      const int64_t y = ih + g.pad - ki;  // = oh * stride
      if (y < 0 || y % g.stride != 0 || y / g.stride >= g.OH) continue;
      const int64_t oh = y / g.stride;
      for (int64_t kj = 0; kj < g.K; ++kj) {
        const int64_t x = iw + g.pad - kj;  // = ow * stride
        if (x < 0 || x % g.stride != 0 || x / g.stride >= g.OW) continue;
        const int64_t ow = x / g.stride;
        acc += cb[((c * g.K + ki) * g.K + kj) * P + oh * g.OW + ow];
      }
    }
    image[i] = acc;
  }
}

// out[b, oc, :] = bias[oc] over all samples (the per-sample GEMMs add on top).
__global__ void fill_bias_planes_kernel(float* out, const float* bias, int64_t B, int64_t OC, int64_t P) {
  const int64_t total = B * OC * P;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = bias[(i / P) % OC];
}

// sums[b, oc] = sum_p dout[b, oc, p]: one block per plane, a fixed-shape tree
// (strided per-thread partials, then a shared-memory halving), so the sums
// are deterministic. The bias gradient then adds them over the samples
// (column_sums). Before, one block per channel looped over all samples: 32 or
// 64 blocks for the CNN, each 128 dependent plane sums.
__global__ void conv_plane_sums_kernel(float* sums, const float* dout, int64_t B, int64_t OC, int64_t P) {
  __shared__ float sh[kThreads];
  const int64_t oc = blockIdx.x;
  for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const float* plane = dout + (b * OC + oc) * P;
    float part = 0.0f;
    for (int64_t p = threadIdx.x; p < P; p += kThreads) part += plane[p];
    sh[threadIdx.x] = part;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (int(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[b * OC + oc] = sh[0];
    __syncthreads();  // before the next plane overwrites sh
  }
}

// dW[e] = (accumulate or not first ? dW[e] : 0) + partial[0][e] + ... +
// partial[n-1][e], the samples in order as the per-sample GEMMs did.
__global__ void add_partials_kernel(float* dw, const float* partial, int64_t n, int64_t per, bool overwrite) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < per; e += int64_t(gridDim.x) * blockDim.x) {
    float acc = overwrite ? 0.0f : dw[e];
    for (int64_t b = 0; b < n; ++b) acc += partial[b * per + e];
    dw[e] = acc;
  }
}

int64_t g_cols_limit_bytes = int64_t(128) << 20;  // set_conv_cols_limit

// Samples per pass: as many as keep the pass's workspace within the limit
// (at least one). Per sample: its cols and its weight-gradient partial, and
// with bf16 GEMMs their bf16 copies (gemm.cu packs both operands, the shared
// weight once per sample).
int64_t samples_per_pass(const Conv2dShape& s) {
  const int64_t cols = s.col_floats(), weights = s.OC * s.C * s.K * s.K;
  int64_t per_sample = (cols + weights) * int64_t(sizeof(float));
  if (gemm_precision() == GemmPrecision::bf16) per_sample += (cols + weights) * 2;
  const int64_t n = per_sample > 0 ? g_cols_limit_bytes / per_sample : s.B;
  return n < 1 ? 1 : (n > s.B ? s.B : n);
}

// The cols of samples [b0, b0 + n) in the conv_cols scratch slot (or the
// images themselves for a 1x1 stride-1 unpadded kernel).
const float* batch_cols(const float* in, int64_t b0, int64_t n, const Conv2dShape& s) {
  const float* images = in + b0 * s.C * s.H * s.W;
  if (col_is_image(s)) return images;
  auto* cols = static_cast<float*>(scratch(ScratchSlot::conv_cols, size_t(n * s.col_floats()) * sizeof(float)));
  const int64_t total = n * s.col_floats();
  im2col_kernel<<<grid_for(total, kThreads), kThreads, 0, compute_stream()>>>(cols, images, geometry(s), n);
  ST_CUDA_CHECK_LAUNCH("im2col_kernel");
  return cols;
}

}  // namespace

int64_t set_conv_cols_limit(int64_t bytes) {
  const int64_t before = g_cols_limit_bytes;
  g_cols_limit_bytes = bytes;
  return before;
}

void im2col(float* col, const float* image, const Conv2dShape& s) {
  check_shape("cuda::im2col", s);
  const int64_t n = s.col_floats();
  im2col_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(col, image, geometry(s), 1);
  ST_CUDA_CHECK_LAUNCH("im2col_kernel");
}

void col2im(float* image, const float* col, const Conv2dShape& s) {
  check_shape("cuda::col2im", s);
  const int64_t n = s.C * s.H * s.W;
  col2im_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(image, col, geometry(s), 1);
  ST_CUDA_CHECK_LAUNCH("col2im_kernel");
}

// The samples in passes of samples_per_pass (all of them, for the reference
// models): one im2col and one strided-batched GEMM per pass instead of one of
// each per sample. The caller's one-sample col workspace is not needed.
void conv2d_forward(float* out, const float* in, const float* weight, const float* bias, float*, const Conv2dShape& s) {
  check_shape("cuda::conv2d_forward", s);
  const int64_t P = s.OH() * s.OW(), CKK = s.C * s.K * s.K;
  if (s.B == 0) return;
  // Bias fused as in linear: planes start at bias[oc], the GEMMs add on top.
  if (bias != nullptr) {
    const int64_t n = s.B * s.OC * P;
    fill_bias_planes_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(out, bias, s.B, s.OC, P);
    ST_CUDA_CHECK_LAUNCH("fill_bias_planes_kernel");
  }
  const int64_t pass = samples_per_pass(s);
  for (int64_t b0 = 0; b0 < s.B; b0 += pass) {
    const int64_t n = s.B - b0 < pass ? s.B - b0 : pass;
    const float* cols = batch_cols(in, b0, n, s);
    // out_b[OC, P] = W[OC, CKK] * col_b[CKK, P] for each sample b (W shared: stride 0).
    gemm_strided_batched(false, false, s.OC, P, CKK, 1.0f, weight, CKK, 0, cols, P, CKK * P,
                         bias != nullptr ? 1.0f : 0.0f, out + b0 * s.OC * P, P, s.OC * P, n);
  }
}

// Per pass: one im2col, one strided-batched GEMM for the samples' weight
// gradients (partials, added in sample order by one kernel), one for their
// col gradients, one col2im.
void conv2d_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     float*, const Conv2dShape& s, bool accumulate) {
  check_shape("cuda::conv2d_backward", s);
  const int64_t P = s.OH() * s.OW(), CKK = s.C * s.K * s.K, image_size = s.C * s.H * s.W;
  if (s.B == 0 && !accumulate)  // no samples: the sums are empty
    ST_CUDA_CHECK(cudaMemsetAsync(dweight, 0, size_t(s.OC * CKK) * sizeof(float), compute_stream()));
  // dbias for all samples at once (it reads dout only): each plane's sum,
  // then those added over the samples. The plane sums borrow the partials'
  // workspace, which the passes below reuse after them on the stream.
  if (dbias != nullptr && s.OC > 0) {
    float* sums = nullptr;
    if (s.B > 0) {
      sums = static_cast<float*>(scratch(ScratchSlot::conv_partials, size_t(s.B * s.OC) * sizeof(float)));
      const dim3 grid(unsigned(s.OC), unsigned(s.B < 65535 ? s.B : 65535));
      conv_plane_sums_kernel<<<grid, kThreads, 0, compute_stream()>>>(sums, dout, s.B, s.OC, P);
      ST_CUDA_CHECK_LAUNCH("conv_plane_sums_kernel");
    }
    column_sums(dbias, sums, s.B, s.OC, accumulate);
  }
  const int64_t pass = samples_per_pass(s), per = s.OC * CKK;
  for (int64_t b0 = 0; b0 < s.B; b0 += pass) {
    const int64_t n = s.B - b0 < pass ? s.B - b0 : pass;
    const float* g = dout + b0 * s.OC * P;
    const float* cols = batch_cols(in, b0, n, s);
    // partial_b[OC, CKK] = dout_b[OC, P] * col_b[CKK, P]^T, then added into dW.
    auto* partial = static_cast<float*>(scratch(ScratchSlot::conv_partials, size_t(n * per) * sizeof(float)));
    gemm_strided_batched(false, true, s.OC, CKK, P, 1.0f, g, P, s.OC * P, cols, P, CKK * P, 0.0f, partial, CKK, per, n);
    const bool overwrite = b0 == 0 && !accumulate;  // no zeroing pass
    add_partials_kernel<<<grid_for(per, kThreads), kThreads, 0, compute_stream()>>>(dweight, partial, n, per,
                                                                                    overwrite);
    ST_CUDA_CHECK_LAUNCH("add_partials_kernel");
    if (din == nullptr) continue;
    // dcol_b[CKK, P] = W^T * dout_b, gathered back onto image b. The cols
    // are free again (the GEMM above, earlier on the stream, read them last),
    // so they hold dcol.
    float* dimages = din + b0 * image_size;
    if (col_is_image(s)) {
      gemm_strided_batched(true, false, CKK, P, s.OC, 1.0f, weight, CKK, 0, g, P, s.OC * P, 0.0f, dimages, P,
                           image_size, n);
    } else {
      auto* dcols = const_cast<float*>(cols);  // the conv_cols scratch slot
      gemm_strided_batched(true, false, CKK, P, s.OC, 1.0f, weight, CKK, 0, g, P, s.OC * P, 0.0f, dcols, P, CKK * P, n);
      const int64_t total = n * image_size;
      col2im_kernel<<<grid_for(total, kThreads), kThreads, 0, compute_stream()>>>(dimages, dcols, geometry(s), n);
      ST_CUDA_CHECK_LAUNCH("col2im_kernel");
    }
  }
}

}  // namespace shardtrain::cuda
