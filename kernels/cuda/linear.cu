#include "kernels/cuda/linear.h"

#include "kernels/cuda/column_sum.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"

#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;

// out[n, o] = bias[o] for every row n (the GEMM then adds in*W^T on top).
__global__ void fill_bias_rows_kernel(float* out, const float* bias, int64_t N, int64_t OC) {
  const int64_t total = N * OC;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = bias[i % OC];
}

void check_sizes(const char* fn, int64_t N, int64_t IC, int64_t OC) {
  ST_CUDA_REQUIRE(N >= 0 && IC >= 0 && OC >= 0, std::string(fn) + ": negative size N=" + std::to_string(N) +
                                                    " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC));
}

// The operands of a linear layer's GEMMs: f32 (converted per call where
// GEMMs are bf16), or bf16 copies made once (`packed`).
struct Operands {
  const void* in;
  const void* weight;
  bool packed;
};

void forward(float* out, const Operands& x, const float* bias, int64_t N, int64_t IC, int64_t OC) {
  // W is [OC, IC], so in[N,IC] * W^T is the "NT" GEMM; cuBLASLt adds the
  // bias in its epilogue, as the GEMM writes each tile.
  const LtEpilogue ep = bias != nullptr ? LtEpilogue::bias : LtEpilogue::none;
  auto* b = const_cast<float*>(bias);
  const auto* in = static_cast<const float*>(x.in);
  const auto* weight = static_cast<const float*>(x.weight);
  if (linear_backend() == LinearBackend::cublaslt &&
      (x.packed ? gemm_lt_packed(false, true, N, OC, IC, {x.in, IC, 0}, {x.weight, IC, 0}, 0.0f, out, OC, ep, b)
                : gemm_lt(false, true, N, OC, IC, in, IC, weight, IC, 0.0f, out, OC, ep, b)))
    return;
  // Bias fused as on the CPU: out starts as the bias rows, the GEMM adds on top.
  if (bias != nullptr) {
    fill_bias_rows_kernel<<<grid_for(N * OC, kThreads), kThreads, 0, compute_stream()>>>(out, bias, N, OC);
    ST_CUDA_CHECK_LAUNCH("fill_bias_rows_kernel");
  }
  const float beta = bias != nullptr ? 1.0f : 0.0f;
  if (x.packed) {
    gemm_packed(false, true, N, OC, IC, 1.0f, {x.in, IC, 0}, {x.weight, IC, 0}, beta, out, OC);
  } else {
    gemm(false, true, N, OC, IC, 1.0f, in, IC, weight, IC, beta, out, OC);
  }
}

// dout: f32, or (packed) its bf16 copy; dout_f32 is the f32 one either way
// (the separate column sums read it).
void backward(float* din, float* dweight, float* dbias, const void* dout, const float* dout_f32, const Operands& x,
              int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  const auto* d = static_cast<const float*>(dout);
  // din[N,IC] = dout[N,OC] * W[OC,IC] (beta 0 overwrites).
  if (din != nullptr) {
    if (x.packed) {
      gemm_packed(false, false, N, IC, OC, 1.0f, {dout, OC, 0}, {x.weight, IC, 0}, 0.0f, din, IC);
    } else {
      gemm(false, false, N, IC, OC, 1.0f, d, OC, static_cast<const float*>(x.weight), IC, 0.0f, din, IC);
    }
  }
  // dW[OC,IC] = dout^T * in with dbias = dout's column sums in the same
  // GEMM's epilogue. The epilogue overwrites, so accumulation (and the
  // cases cuBLASLt has no algorithm for) take the separate column sums.
  if (dbias != nullptr && !accumulate && linear_backend() == LinearBackend::cublaslt &&
      (x.packed ? gemm_lt_packed(true, false, OC, IC, N, {dout, OC, 0}, {x.in, IC, 0}, 0.0f, dweight, IC,
                                 LtEpilogue::bias_grad_a, dbias)
                : gemm_lt(true, false, OC, IC, N, d, OC, static_cast<const float*>(x.in), IC, 0.0f, dweight, IC,
                          LtEpilogue::bias_grad_a, dbias)))
    return;
  // dW[OC,IC] (+)= dout^T * in; with N == 0 the GEMM's empty sum zeroes dW
  // (or leaves it when accumulating).
  const float beta = accumulate ? 1.0f : 0.0f;
  if (x.packed) {
    gemm_packed(true, false, OC, IC, N, 1.0f, {dout, OC, 0}, {x.in, IC, 0}, beta, dweight, IC);
  } else {
    gemm(true, false, OC, IC, N, 1.0f, d, OC, static_cast<const float*>(x.in), IC, beta, dweight, IC);
  }
  if (dbias != nullptr) column_sums(dbias, dout_f32, N, OC, accumulate);
}

// The bf16 values inside a kept buffer: the input, then the weight.
struct Kept {
  bf16* in;
  bf16* weight;
};
// The weight starts 256 bytes aligned, as cuBLASLt's fastest kernels want.
int64_t weight_offset(int64_t N, int64_t IC) { return (N * IC + 127) / 128 * 128; }
Kept kept_parts(const void* buffer, int64_t N, int64_t IC) {
  auto* base = static_cast<uint16_t*>(const_cast<void*>(buffer));  // bf16 bits
  return {reinterpret_cast<bf16*>(base), reinterpret_cast<bf16*>(base + weight_offset(N, IC))};
}

}  // namespace

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC) {
  check_sizes("cuda::linear_forward", N, IC, OC);
  if (N == 0 || OC == 0) return;
  forward(out, {in, weight, false}, bias, N, IC, OC);
}

int64_t linear_kept_bf16_elements(int64_t N, int64_t IC, int64_t OC) { return weight_offset(N, IC) + OC * IC; }

void linear_forward_keep_bf16(float* out, void* bf16_copies, const float* in, const float* weight, const float* bias,
                              int64_t N, int64_t IC, int64_t OC) {
  check_sizes("cuda::linear_forward_keep_bf16", N, IC, OC);
  if (N == 0 || OC == 0) return;
  const Kept k = kept_parts(bf16_copies, N, IC);
  f32_to_bf16(k.in, in, N * IC);
  f32_to_bf16(k.weight, weight, OC * IC);
  forward(out, {k.in, k.weight, true}, bias, N, IC, OC);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  check_sizes("cuda::linear_backward", N, IC, OC);
  backward(din, dweight, dbias, dout, dout, {in, weight, false}, N, IC, OC, accumulate);
}

void linear_backward_kept_bf16(float* din, float* dweight, float* dbias, const float* dout, const void* bf16_copies,
                               int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  check_sizes("cuda::linear_backward_kept_bf16", N, IC, OC);
  const Kept k = kept_parts(bf16_copies, N, IC);
  // dout once, for both GEMMs; gemm_a is free (the packed GEMMs pack nothing).
  auto* dout16 = static_cast<bf16*>(scratch(ScratchSlot::gemm_a, size_t(N * OC) * 2));
  f32_to_bf16(dout16, dout, N * OC);
  backward(din, dweight, dbias, dout16, dout, {k.in, k.weight, true}, N, IC, OC, accumulate);
}

}  // namespace shardtrain::cuda
