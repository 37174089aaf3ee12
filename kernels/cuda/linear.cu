#include "kernels/cuda/linear.h"

#include "kernels/cuda/activation.h"
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

// gemm_lt or gemm_lt_packed, as `packed` says; false where the backend is
// plain cuBLAS or cuBLASLt has no algorithm.
bool lt(bool packed, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
        const void* B, int64_t ldb, float* C, int64_t ldc, LtEpilogue ep, float* bias, float* aux) {
  if (linear_backend() != LinearBackend::cublaslt) return false;
  if (packed) return gemm_lt_packed(trans_a, trans_b, M, N, K, {A, lda, 0}, {B, ldb, 0}, 0.0f, C, ldc, ep, bias, aux);
  return gemm_lt(trans_a, trans_b, M, N, K, static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb, 0.0f,
                 C, ldc, ep, bias, aux);
}

// gemm or gemm_packed likewise.
void plain(bool packed, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
           const void* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (packed) {
    gemm_packed(trans_a, trans_b, M, N, K, 1.0f, {A, lda, 0}, {B, ldb, 0}, beta, C, ldc);
  } else {
    gemm(trans_a, trans_b, M, N, K, 1.0f, static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb, beta, C,
         ldc);
  }
}

// cuBLASLt's GELU epilogues compute the GELU less exactly than the GELU
// kernels (which give the CPU's values to f32 rounding), well inside a bf16
// GEMM's error but not an f32 one's: they serve bf16 GEMMs only.
bool gelu_epilogue(const Operands& x) { return x.packed || gemm_precision() == GemmPrecision::bf16; }

// out = x W^T + bias; with `pre`: pre = x W^T + bias and out = gelu(pre).
void forward(float* out, const Operands& x, const float* bias, float* pre, int64_t N, int64_t IC, int64_t OC) {
  // W is [OC, IC], so in[N,IC] * W^T is the "NT" GEMM; cuBLASLt adds the
  // bias, and applies the GELU, in its epilogue as the GEMM writes each tile
  // (its GELU epilogue comes with a bias only).
  auto* b = const_cast<float*>(bias);
  if (pre != nullptr && b != nullptr && gelu_epilogue(x) &&
      lt(x.packed, false, true, N, OC, IC, x.in, IC, x.weight, IC, out, OC, LtEpilogue::gelu_aux_bias, b, pre))
    return;
  float* linear_out = pre != nullptr ? pre : out;
  if (!lt(x.packed, false, true, N, OC, IC, x.in, IC, x.weight, IC, linear_out, OC,
          b != nullptr ? LtEpilogue::bias : LtEpilogue::none, b, nullptr)) {
    // Bias fused as on the CPU: the output starts as the bias rows, the GEMM adds on top.
    if (bias != nullptr) {
      fill_bias_rows_kernel<<<grid_for(N * OC, kThreads), kThreads, 0, compute_stream()>>>(linear_out, bias, N, OC);
      ST_CUDA_CHECK_LAUNCH("fill_bias_rows_kernel");
    }
    plain(x.packed, false, true, N, OC, IC, x.in, IC, x.weight, IC, bias != nullptr ? 1.0f : 0.0f, linear_out, OC);
  }
  if (pre != nullptr) gelu_forward(out, pre, N * OC);
}

// dout: f32, or (packed) its bf16 copy; dout_f32 is the f32 one either way
// (the separate column sums read it). With `pre` (this layer's input was
// gelu(pre)), din is the gradient with respect to pre.
void backward(float* din, float* dweight, float* dbias, const void* dout, const float* dout_f32, const Operands& x,
              const float* pre, int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  if (din != nullptr) {
    // din[N,IC] = dout[N,OC] * W[OC,IC] (beta 0 overwrites); through the
    // GELU, times gelu'(pre) in the same GEMM's epilogue.
    auto* aux = const_cast<float*>(pre);
    if (pre == nullptr || !gelu_epilogue(x) ||
        !lt(x.packed, false, false, N, IC, OC, dout, OC, x.weight, IC, din, IC, LtEpilogue::dgelu, nullptr, aux)) {
      plain(x.packed, false, false, N, IC, OC, dout, OC, x.weight, IC, 0.0f, din, IC);
      if (pre != nullptr) gelu_backward(din, din, pre, N * IC);
    }
  }
  // dW[OC,IC] = dout^T * in with dbias = dout's column sums in the same
  // GEMM's epilogue. The epilogue overwrites, so accumulation (and the
  // cases cuBLASLt has no algorithm for) take the separate column sums.
  if (dbias != nullptr && !accumulate &&
      lt(x.packed, true, false, OC, IC, N, dout, OC, x.in, IC, dweight, IC, LtEpilogue::bias_grad_a, dbias, nullptr))
    return;
  // dW[OC,IC] (+)= dout^T * in; with N == 0 the GEMM's empty sum zeroes dW
  // (or leaves it when accumulating).
  plain(x.packed, true, false, OC, IC, N, dout, OC, x.in, IC, accumulate ? 1.0f : 0.0f, dweight, IC);
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

int64_t linear_kept_bf16_elements(int64_t N, int64_t IC, int64_t OC) { return weight_offset(N, IC) + OC * IC; }

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC, const LinearFusion& fusion) {
  check_sizes("cuda::linear_forward", N, IC, OC);
  if (N == 0 || OC == 0) return;
  if (fusion.bf16 == nullptr) {
    forward(out, {in, weight, false}, bias, fusion.gelu_pre, N, IC, OC);
    return;
  }
  const Kept k = kept_parts(fusion.bf16, N, IC);
  f32_to_bf16(k.in, in, N * IC);
  f32_to_bf16(k.weight, weight, OC * IC);
  forward(out, {k.in, k.weight, true}, bias, fusion.gelu_pre, N, IC, OC);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate, const LinearFusion& fusion) {
  check_sizes("cuda::linear_backward", N, IC, OC);
  if (fusion.bf16 == nullptr) {
    backward(din, dweight, dbias, dout, dout, {in, weight, false}, fusion.gelu_pre, N, IC, OC, accumulate);
    return;
  }
  const Kept k = kept_parts(fusion.bf16, N, IC);
  // dout once, for both GEMMs; gemm_a is free (the packed GEMMs pack nothing).
  auto* dout16 = static_cast<bf16*>(scratch(ScratchSlot::gemm_a, size_t(N * OC) * 2));
  f32_to_bf16(dout16, dout, N * OC);
  backward(din, dweight, dbias, dout16, dout, {k.in, k.weight, true}, fusion.gelu_pre, N, IC, OC, accumulate);
}

}  // namespace shardtrain::cuda
