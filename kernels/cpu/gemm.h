// Row-major single-precision GEMM through OpenBLAS:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(X) is X or X^T as trans_* says; lda/ldb/ldc are row strides of the
// matrices as stored. One BLAS thread per rank by default (set_blas_threads).
#pragma once

#include "kernels/kernel_params.h"
#include "runtime/core/dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::cpu {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Operand precision of every gemm() in this process (the products are
// accumulated in f32 either way):
//   f32   cblas_sgemm
//   bf16  A and B rounded to bf16 (nearest even), as a mixed-precision
//         policy computes: through OpenBLAS's cblas_sbgemm when the library
//         exports it (built with BUILD_BFLOAT16; AVX512-BF16/AMX then do the
//         products), else the documented fallback: the rounded operands as
//         f32 through cblas_sgemm. Both give bf16 x bf16 products (exact in
//         f32) summed in f32; only the speed differs.
enum class GemmPrecision { f32, bf16 };
void set_gemm_precision(GemmPrecision precision);
GemmPrecision gemm_precision();
// Whether bf16 GEMMs run on the library's own bf16 kernel (cblas_sbgemm).
bool native_bf16_gemm();
// Whether gemm() hands bf16 operands to a bf16 kernel here (the precision is
// bf16, and oneDNN's matmul or OpenBLAS's sbgemm has one): then a caller
// that holds an operand in bf16 already (mixed precision's activations), or
// uses one in several products, may round it once and call gemm_bf16.
bool bf16_operand_products();
// gemm() on operands already rounded to bf16, stored as gemm()'s A and B
// (row strides lda and ldb): the same products, and the same results, as
// gemm() on the f32 values they were rounded from. Only where
// bf16_operand_products(). Recorded by GemmRecorder (bf16_operands).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);
// gemm_batched() on operands already rounded to bf16 (strides in
// elements): the same products and results as gemm_batched() on the f32
// values they were rounded from, without rounding each operand again on
// every call (operands that overlap are copied apart first, as
// gemm_batched() packs them). Only where bf16_operand_products(). Recorded
// as one call.
void gemm_bf16_batched(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const bf16* A, int64_t lda, int64_t stride_a, const bf16* B, int64_t ldb, int64_t stride_b,
                       float beta, float* C, int64_t ldc, int64_t stride_c);
// C[M,N] = op(A) op(B) + bias, the bias [N] added to every row (a linear
// layer's forward; alpha 1). Where oneDNN computes the product (f32, or
// gemm_bf16_bias's bf16 operands) the bias is added in its epilogue, so C is
// written once and never read (recorded by GemmRecorder with `bias` set);
// elsewhere C's rows start as the bias and the product is added with
// beta = 1. The same bits either way.
void gemm_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
               int64_t ldb, const float* bias, float* C, int64_t ldc);
void gemm_bf16_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const bf16* A, int64_t lda,
                    const bf16* B, int64_t ldb, const float* bias, float* C, int64_t ldc);
// `count` products as gemm() computes each, C_i = alpha op(A_i) op(B_i) +
// beta C_i, with A_i = A + i * stride_a, B_i = B + i * stride_b and
// C_i = C + i * stride_c (strides in floats; the C_i must not overlap, the
// A_i and B_i may: a stride of 0 multiplies every product by one matrix).
// Where oneDNN computes the products they are one primitive, which for
// small products (an attention head's 64 x 64 tile) saves most of the
// per-call cost and runs oneDNN's brgemm kernels where each operand is dense
// (stride = rows x ld); elsewhere, a gemm() per product. Recorded by
// GemmRecorder as one call (batch = count).
void gemm_batched(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                  float beta, float* C, int64_t ldc, int64_t stride_c);
// The rows x cols matrix at `m` (row stride ld) rounded to bf16 into `out`,
// densely (row stride cols); `out` only grows.
void pack_bf16(std::vector<bf16>& out, const float* m, int64_t rows, int64_t cols, int64_t ld);

// Threads OpenBLAS may use in this process (default 1: one rank per core).
void set_blas_threads(int threads);
int blas_threads();

// The kernel set OpenBLAS chose ("Haswell", "SkylakeX", ...).
std::string blas_core();
// The OPENBLAS_CORETYPE this process should have run with, or empty: a name
// when OpenBLAS chose a core without AVX2 on a CPU that has AVX2 and FMA
// ("Haswell") or AVX-512 ("SkylakeX"), and the variable is unset (a value
// the user set is their choice). OpenBLAS picks its core from CPUID when the
// library loads; a CPU model newer than the library is not recognized and
// gets a generic SSE3 core ("Prescott"): measured on a 2026 Xeon with
// Debian's 0.3.21, the MLP's step took 89.6 ms against 19.1 ms with Haswell's
// kernels and 11.7-16.6 ms with SkylakeX's. The variable only works before
// the library loads: `shardtrain` restarts itself with it
// (runtime/train/blas_core.h).
std::string suggested_blas_core();
// The same from its inputs: OPENBLAS_CORETYPE (null when unset), the core
// OpenBLAS chose, and the CPU's features.
std::string suggested_blas_core(const char* coretype_env, const std::string& core, bool avx2_fma, bool avx512);
// Empty, or one line saying what suggested_blas_core() found and which
// variable to set (for a process that could not restart itself).
std::string blas_core_warning();

// One gemm() or gemm_bf16() call, as recorded by GemmRecorder: its shape,
// and (zero where a call is made up rather than recorded) its strides,
// scalars and operand addresses, and whether A and B were bf16 already
// (gemm_bf16). The addresses are only compared: which calls of a step read
// or wrote the same matrix, so that a replay can share memory as the step did.
struct GemmCall {
  bool trans_a, trans_b;
  int64_t M, N, K;
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void *a = nullptr, *b = nullptr;
  const float* c = nullptr;
  const float* bias = nullptr;  // gemm_bias's, where oneDNN adds it (f32 operands, alpha 1, beta 0)
  bool bf16_operands = false;
  // gemm_batched's: its count and the operands' strides between products.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  double flops() const { return 2.0 * double(batch) * double(M) * double(N) * double(K); }
};

// One pass of a convolution oneDNN computed whole (onednn_conv.h), as
// recorded by GemmRecorder: the forward, or the backward (the weight
// gradient, and the input gradient where input_gradient).
struct ConvCall {
  kernels::Conv2dShape shape;
  bool backward = false, input_gradient = false;
  // A forward whose output stayed in oneDNN's layout (a pooled forward:
  // onednn_conv_maxpool_forward), replayed as such.
  bool in_its_layout = false;
  double flops() const { return shape.forward_flops() * (backward && input_gradient ? 2.0 : 1.0); }
};

// While a GemmRecorder is alive on a thread, every gemm() on that thread
// appends its call to calls(), and every oneDNN convolution pass to convs()
// (im2col's convolutions are gemm() calls already). Used to count a training
// step's model FLOPs and to replay exactly the step's products in the
// products-vs-step benchmark.
class GemmRecorder {
 public:
  GemmRecorder();
  ~GemmRecorder();
  GemmRecorder(const GemmRecorder&) = delete;
  GemmRecorder& operator=(const GemmRecorder&) = delete;
  const std::vector<GemmCall>& calls() const { return calls_; }
  const std::vector<ConvCall>& convs() const { return convs_; }
  // The FLOPs of everything recorded.
  double flops() const;

 private:
  friend void record_gemm(const GemmCall& call);
  friend void record_conv(const ConvCall& call);
  std::vector<GemmCall> calls_;
  std::vector<ConvCall> convs_;
  GemmRecorder* previous_;
};

// Append to this thread's live GemmRecorder, if any.
void record_conv(const ConvCall& call);
void record_gemm(const GemmCall& call);

}  // namespace shardtrain::cpu
