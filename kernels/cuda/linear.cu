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
// plain cuBLAS or cuBLASLt has no algorithm. A bf16 C needs packed operands.
bool lt(bool packed, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
        const void* B, int64_t ldb, void* C, int64_t ldc, LtEpilogue ep, float* bias, void* aux, bool c_bf16 = false) {
  if (linear_backend() != LinearBackend::cublaslt) return false;
  if (packed)
    return gemm_lt_packed(trans_a, trans_b, M, N, K, {A, lda, 0}, {B, ldb, 0}, 0.0f, C, ldc, ep, bias, aux, c_bf16);
  return gemm_lt(trans_a, trans_b, M, N, K, static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb, 0.0f,
                 static_cast<float*>(C), ldc, ep, bias, static_cast<float*>(aux));
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

// An f32 stand-in for n values of a bf16 activation, where the fallbacks
// compute in f32 and round once at the end.
float* staging(ScratchSlot slot, int64_t n) { return static_cast<float*>(scratch(slot, size_t(n) * sizeof(float))); }

// out = x W^T + bias; with `pre`: pre = x W^T + bias and out = gelu(pre).
void forward_f32(float* out, const Operands& x, const float* bias, float* pre, int64_t N, int64_t IC, int64_t OC) {
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

// forward_f32 with out (and pre) bf16: straight from the GEMM's epilogue,
// or where cuBLASLt declines, computed in f32 and rounded.
void forward_bf16(void* out, const Operands& x, const float* bias, void* pre, int64_t N, int64_t IC, int64_t OC) {
  auto* b = const_cast<float*>(bias);
  const LtEpilogue ep =
      pre != nullptr ? LtEpilogue::gelu_aux_bias : (b != nullptr ? LtEpilogue::bias : LtEpilogue::none);
  if ((pre == nullptr || b != nullptr) &&
      lt(x.packed, false, true, N, OC, IC, x.in, IC, x.weight, IC, out, OC, ep, b, pre, /*c_bf16=*/true))
    return;
  float* out32 = staging(ScratchSlot::staging_0, N * OC);
  float* pre32 = pre != nullptr ? staging(ScratchSlot::staging_1, N * OC) : nullptr;
  forward_f32(out32, x, bias, pre32, N, IC, OC);
  f32_to_bf16(static_cast<bf16*>(out), out32, N * OC);
  if (pre != nullptr) f32_to_bf16(static_cast<bf16*>(pre), pre32, N * OC);
}

// din[N,IC] = dout[N,OC] * W[OC,IC] (beta 0 overwrites); through the GELU
// (pre: this layer's input was gelu(pre)), times gelu'(pre) in the same
// GEMM's epilogue. din and pre are bf16 where din_bf16.
void input_gradient(void* din, const void* dout, const Operands& x, const void* pre, int64_t N, int64_t IC, int64_t OC,
                    bool din_bf16) {
  auto* aux = const_cast<void*>(pre);
  const LtEpilogue ep = pre != nullptr ? LtEpilogue::dgelu : LtEpilogue::none;
  if ((pre == nullptr || gelu_epilogue(x)) && (din_bf16 || pre != nullptr) &&
      lt(x.packed, false, false, N, IC, OC, dout, OC, x.weight, IC, din, IC, ep, nullptr, aux, din_bf16))
    return;
  float* din32 = din_bf16 ? staging(ScratchSlot::staging_0, N * IC) : static_cast<float*>(din);
  plain(x.packed, false, false, N, IC, OC, dout, OC, x.weight, IC, 0.0f, din32, IC);
  if (pre != nullptr) {
    const float* pre32 = static_cast<const float*>(pre);
    if (din_bf16) {
      float* widened = staging(ScratchSlot::staging_1, N * IC);
      bf16_to_f32(widened, static_cast<const bf16*>(pre), N * IC);
      pre32 = widened;
    }
    gelu_backward(din32, din32, pre32, N * IC);
  }
  if (din_bf16) f32_to_bf16(static_cast<bf16*>(din), din32, N * IC);
}

// dout: f32, or (packed) bf16; dout_f32 is its f32 values where the caller
// has them (null: widened here, if the separate column sums need them).
void backward(void* din, float* dweight, float* dbias, const void* dout, const float* dout_f32, const Operands& x,
              const void* pre, int64_t N, int64_t IC, int64_t OC, bool accumulate, bool din_bf16) {
  if (din != nullptr) input_gradient(din, dout, x, pre, N, IC, OC, din_bf16);
  // dW[OC,IC] = dout^T * in with dbias = dout's column sums in the same
  // GEMM's epilogue. The epilogue overwrites, so accumulation (and the
  // cases cuBLASLt has no algorithm for) take the separate column sums.
  if (dbias != nullptr && !accumulate &&
      lt(x.packed, true, false, OC, IC, N, dout, OC, x.in, IC, dweight, IC, LtEpilogue::bias_grad_a, dbias, nullptr))
    return;
  // dW[OC,IC] (+)= dout^T * in; with N == 0 the GEMM's empty sum zeroes dW
  // (or leaves it when accumulating).
  plain(x.packed, true, false, OC, IC, N, dout, OC, x.in, IC, accumulate ? 1.0f : 0.0f, dweight, IC);
  if (dbias == nullptr) return;
  if (dout_f32 == nullptr) {
    float* widened = staging(ScratchSlot::staging_2, N * OC);
    bf16_to_f32(widened, static_cast<const bf16*>(dout), N * OC);
    dout_f32 = widened;
  }
  column_sums(dbias, dout_f32, N, OC, accumulate);
}

// The bf16 values inside a kept buffer: the weight's copy first, at a place
// that does not depend on N (so a later micro-batch can reuse it), then
// the input's (none where the input is bf16 itself).
struct Kept {
  bf16* in;
  bf16* weight;
};
// The input starts 256 bytes aligned, as cuBLASLt's fastest kernels want.
int64_t input_offset(int64_t IC, int64_t OC) { return (OC * IC + 127) / 128 * 128; }
Kept kept_parts(const void* buffer, int64_t IC, int64_t OC) {
  auto* base = static_cast<uint16_t*>(const_cast<void*>(buffer));  // bf16 bits
  return {reinterpret_cast<bf16*>(base + input_offset(IC, OC)), reinterpret_cast<bf16*>(base)};
}

bool any_bf16(const LinearFusion& f) { return f.in_bf16 || f.out_bf16 || f.dout_bf16 || f.din_bf16; }

}  // namespace

int64_t linear_kept_bf16_elements(int64_t N, int64_t IC, int64_t OC, bool in_bf16) {
  return in_bf16 ? OC * IC : input_offset(IC, OC) + N * IC;
}

void linear_forward(void* out, const void* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC, const LinearFusion& fusion) {
  check_sizes("cuda::linear_forward", N, IC, OC);
  ST_CUDA_REQUIRE(fusion.bf16 != nullptr || !any_bf16(fusion),
                  "cuda::linear_forward: bf16 activations need the kept bf16 buffer");
  if (N == 0 || OC == 0) return;
  if (fusion.bf16 == nullptr) {
    forward_f32(static_cast<float*>(out), {in, weight, false}, bias, static_cast<float*>(fusion.gelu_pre), N, IC, OC);
    return;
  }
  const Kept k = kept_parts(fusion.bf16, IC, OC);
  const void* in16 = fusion.in_bf16 ? in : k.in;
  if (!fusion.in_bf16) f32_to_bf16(k.in, static_cast<const float*>(in), N * IC);
  if (!fusion.weight_kept) f32_to_bf16(k.weight, weight, OC * IC);
  const Operands x{in16, k.weight, true};
  if (fusion.out_bf16) {
    forward_bf16(out, x, bias, fusion.gelu_pre, N, IC, OC);
  } else {
    forward_f32(static_cast<float*>(out), x, bias, static_cast<float*>(fusion.gelu_pre), N, IC, OC);
  }
}

void linear_backward(void* din, float* dweight, float* dbias, const void* dout, const void* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate, const LinearFusion& fusion) {
  check_sizes("cuda::linear_backward", N, IC, OC);
  ST_CUDA_REQUIRE(fusion.bf16 != nullptr || !any_bf16(fusion),
                  "cuda::linear_backward: bf16 activations need the kept bf16 buffer");
  if (fusion.bf16 == nullptr) {
    const auto* dout32 = static_cast<const float*>(dout);
    backward(din, dweight, dbias, dout, dout32, {in, weight, false}, fusion.gelu_pre, N, IC, OC, accumulate, false);
    return;
  }
  const Kept k = kept_parts(fusion.bf16, IC, OC);
  const void* in16 = fusion.in_bf16 ? in : k.in;
  const void* dout16 = dout;
  const float* dout32 = nullptr;
  if (!fusion.dout_bf16) {
    // dout once, for both GEMMs; gemm_a is free (the packed GEMMs pack nothing).
    auto* converted = static_cast<bf16*>(scratch(ScratchSlot::gemm_a, size_t(N * OC) * 2));
    dout32 = static_cast<const float*>(dout);
    f32_to_bf16(converted, dout32, N * OC);
    dout16 = converted;
  }
  backward(din, dweight, dbias, dout16, dout32, {in16, k.weight, true}, fusion.gelu_pre, N, IC, OC, accumulate,
           fusion.din_bf16);
}

}  // namespace shardtrain::cuda
