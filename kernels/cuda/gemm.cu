#include "kernels/cuda/gemm.h"

#include "kernels/cuda/context.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>

namespace shardtrain::cuda {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// cuBLAS takes int dimensions and leading dimensions.
int to_int(int64_t v, const char* what) {
  ST_CUDA_REQUIRE(v >= 0 && v <= INT_MAX,
                  std::string("cuda gemm: ") + what + " = " + str(v) + " does not fit a cuBLAS int");
  return int(v);
}

// The host-side argument checks shared by gemm and gemm_strided_batched (the
// same rules as cpu::gemm: row strides must cover the stored width).
void check_args(const char* fn, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                int64_t ldc, int64_t batch) {
  ST_CUDA_REQUIRE(M >= 0 && N >= 0 && K >= 0 && batch >= 0, std::string(fn) + ": negative size M=" + str(M) + " N=" +
                                                                str(N) + " K=" + str(K) + " batch=" + str(batch));
  ST_CUDA_REQUIRE(lda >= std::max<int64_t>(1, trans_a ? M : K) && ldb >= std::max<int64_t>(1, trans_b ? K : N) &&
                      ldc >= std::max<int64_t>(1, N),
                  std::string(fn) + ": strides lda=" + str(lda) + " ldb=" + str(ldb) + " ldc=" + str(ldc) +
                      " too small for M=" + str(M) + " N=" + str(N) + " K=" + str(K) + " (trans " +
                      (trans_a ? "T" : "N") + (trans_b ? "T" : "N") + ")");
}

// C = beta * C over `batch` row-major [M, N] blocks (the K == 0 case: an
// empty sum). beta == 0 writes zeros without reading C, as BLAS does.
__global__ void scale_kernel(float* C, int64_t M, int64_t N, int64_t ldc, int64_t stride_c, int64_t batch, float beta) {
  const int64_t total = batch * M * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / (M * N), rem = i % (M * N);
    float* c = C + b * stride_c + (rem / N) * ldc + rem % N;
    *c = beta == 0.0f ? 0.0f : beta * *c;
  }
}

// Packs `batch` row-major [rows, cols] f32 blocks (row stride ld, batch
// stride `stride`) into contiguous bf16 blocks of rows*cols, rounding to
// nearest even.
__global__ void pack_bf16_kernel(__nv_bfloat16* dst, const float* src, int64_t rows, int64_t cols, int64_t ld,
                                 int64_t stride, int64_t batch) {
  const int64_t per = rows * cols, total = batch * per;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / per, rem = i % per;
    dst[i] = __float2bfloat16_rn(src[b * stride + (rem / cols) * ld + rem % cols]);
  }
}

}  // namespace

GemmOperand gemm_operand(const float* X, int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch,
                         bool to_bf16, ScratchSlot slot) {
  if (!to_bf16) return {X, ld, stride};
  if (stride == 0) batch = 1;
  const int64_t n = batch * rows * cols;
  auto* dst = static_cast<__nv_bfloat16*>(scratch(slot, size_t(n) * sizeof(__nv_bfloat16)));
  pack_bf16_kernel<<<grid_for(n), 256, 0, compute_stream()>>>(dst, X, rows, cols, ld, stride, batch);
  ST_CUDA_CHECK_LAUNCH("pack_bf16_kernel");
  return {dst, std::max<int64_t>(1, cols), stride == 0 ? 0 : rows * cols};
}

namespace {

// The common path. Row-major C = op(A) op(B) is column-major C^T =
// op(B)^T op(A)^T: a row-major matrix with row stride ld is, read
// column-major, its transpose with leading dimension ld. So cuBLAS gets the
// operands swapped (B first, then A), the same transpose flags, and the
// dimensions N x M x K.
// `packed`: A and B are bf16 copies already (gemm_packed), used as they are.
void run(const char* fn, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
         int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta, float* C,
         int64_t ldc, int64_t stride_c, int64_t batch, bool packed = false) {
  check_args(fn, trans_a, trans_b, M, N, K, lda, ldb, ldc, batch);
  if (M == 0 || N == 0 || batch == 0) return;
  ST_CUDA_REQUIRE(C != nullptr, std::string(fn) + ": C is null");
  if (K == 0) {
    const int64_t n = batch * M * N;
    scale_kernel<<<grid_for(n), 256, 0, compute_stream()>>>(C, M, N, ldc, stride_c, batch, beta);
    ST_CUDA_CHECK_LAUNCH("scale_kernel");
    return;
  }
  ST_CUDA_REQUIRE(A != nullptr && B != nullptr, std::string(fn) + ": A or B is null");

  const GemmPrecision precision = packed ? GemmPrecision::bf16 : gemm_precision();
  const bool bf16 = precision == GemmPrecision::bf16;
  // Stored shapes (row-major): A is [K, M] when transposed, else [M, K]; B likewise.
  const GemmOperand a =
      packed ? GemmOperand{A, lda, stride_a}
             : gemm_operand(A, trans_a ? K : M, trans_a ? M : K, lda, stride_a, batch, bf16, ScratchSlot::gemm_a);
  const GemmOperand b =
      packed ? GemmOperand{B, ldb, stride_b}
             : gemm_operand(B, trans_b ? N : K, trans_b ? K : N, ldb, stride_b, batch, bf16, ScratchSlot::gemm_b);
  const cudaDataType_t ab_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision == GemmPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  cublasHandle_t handle = cublas();
  // Default math: CUBLAS_COMPUTE_32F then stays true f32 (no TF32 tensor ops,
  // whatever math mode an earlier user left on the shared handle); the
  // compute type alone selects TF32, and bf16 inputs use tensor cores with
  // f32 accumulation. alpha and beta are host scalars.
  ST_CUBLAS_CHECK(cublas_api().SetMathMode(handle, CUBLAS_DEFAULT_MATH));
  ST_CUBLAS_CHECK(cublas_api().SetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    ST_CUBLAS_CHECK(cublas_api().GemmEx(handle, op_b, op_a, to_int(N, "N"), to_int(M, "M"), to_int(K, "K"), &alpha,
                                        b.ptr, ab_type, to_int(b.ld, "ldb"), a.ptr, ab_type, to_int(a.ld, "lda"), &beta,
                                        C, CUDA_R_32F, to_int(ldc, "ldc"), compute, CUBLAS_GEMM_DEFAULT));
  } else {
    ST_CUBLAS_CHECK(cublas_api().GemmStridedBatchedEx(
        handle, op_b, op_a, to_int(N, "N"), to_int(M, "M"), to_int(K, "K"), &alpha, b.ptr, ab_type, to_int(b.ld, "ldb"),
        static_cast<long long>(b.stride), a.ptr, ab_type, to_int(a.ld, "lda"), static_cast<long long>(a.stride), &beta,
        C, CUDA_R_32F, to_int(ldc, "ldc"), static_cast<long long>(stride_c), to_int(batch, "batch"), compute,
        CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  run("cuda::gemm", trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

void gemm_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const GemmOperand& a,
                 const GemmOperand& b, float beta, float* C, int64_t ldc) {
  // run() reads the packed pointers through its f32 parameters, untouched.
  run("cuda::gemm_packed", trans_a, trans_b, M, N, K, alpha, static_cast<const float*>(a.ptr), a.ld, 0,
      static_cast<const float*>(b.ptr), b.ld, 0, beta, C, ldc, 0, 1, /*packed=*/true);
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                          int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta,
                          float* C, int64_t ldc, int64_t stride_c, int64_t batch) {
  run("cuda::gemm_strided_batched", trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
      stride_c, batch);
}

}  // namespace shardtrain::cuda
