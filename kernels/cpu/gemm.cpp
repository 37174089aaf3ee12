#include "kernels/cpu/gemm.h"

#include "runtime/core/error.h"

#include <cblas.h>

#include <algorithm>
#include <climits>

namespace shardtrain::cpu {
namespace {

// The innermost live GemmRecorder of this thread (null when none).
thread_local GemmRecorder* t_recorder = nullptr;

// OpenBLAS starts with one thread per core; a rank is meant to own one core,
// so the default is 1 (applied once, before the first gemm or query).
int& configured_threads() {
  static int threads = [] {
    openblas_set_num_threads(1);
    return 1;
  }();
  return threads;
}

// CBLAS takes int dimensions (32-bit OpenBLAS interface).
int to_blas_int(int64_t v, const char* what) {
  ST_CHECK(v >= 0 && v <= INT_MAX, "gemm: {} = {} does not fit a BLAS int", what, v);
  return int(v);
}

}  // namespace

GemmRecorder::GemmRecorder() : previous_(t_recorder) { t_recorder = this; }
GemmRecorder::~GemmRecorder() { t_recorder = previous_; }

void set_blas_threads(int threads) {
  ST_CHECK(threads >= 1, "set_blas_threads: {} threads (must be >= 1)", threads);
  configured_threads() = threads;
  openblas_set_num_threads(threads);
}

int blas_threads() {
  configured_threads();
  return openblas_get_num_threads();
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  configured_threads();
  if (t_recorder != nullptr) t_recorder->calls_.push_back({trans_a, trans_b, M, N, K});
  if (M == 0 || N == 0) return;
  // Row strides must cover the stored width (row-major: op(A) = A^T stores K rows of M).
  ST_CHECK(lda >= std::max<int64_t>(1, trans_a ? M : K) &&
               ldb >= std::max<int64_t>(1, trans_b ? K : N) && ldc >= std::max<int64_t>(1, N),
           "gemm: strides lda={} ldb={} ldc={} too small for M={} N={} K={} (trans {}{})", lda, ldb,
           ldc, M, N, K, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N');
  if (K == 0) {
    // An empty sum: C = beta*C, and beta = 0 writes zeros (never reads C, as BLAS).
    for (int64_t i = 0; i < M; ++i) {
      float* row = C + i * ldc;
      if (beta == 0.0f)
        std::fill(row, row + N, 0.0f);
      else
        for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, to_blas_int(M, "M"), to_blas_int(N, "N"),
              to_blas_int(K, "K"), alpha, A, to_blas_int(lda, "lda"), B, to_blas_int(ldb, "ldb"),
              beta, C, to_blas_int(ldc, "ldc"));
}

}  // namespace shardtrain::cpu
