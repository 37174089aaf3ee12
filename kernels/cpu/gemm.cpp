#include "kernels/cpu/gemm.h"

#include "runtime/core/error.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/onednn_matmul.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <vector>

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

std::atomic<GemmPrecision> g_precision{GemmPrecision::f32};

// cblas_sbgemm(order, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
// with bf16 A and B (as uint16 bits), looked up at run time: Debian's
// OpenBLAS declares it in cblas.h but is built without it.
using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float, const uint16_t*, int,
                          const uint16_t*, int, float, float*, int);
SbgemmFn sbgemm() {
  static const SbgemmFn fn = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  return fn;
}

// The rows x cols matrix at `m` (row stride ld) rounded to bf16 and kept
// as f32 values, densely (the fallback's operands).
void pack_rounded(std::vector<float>& out, std::vector<bf16>& tmp, const float* m, int64_t rows, int64_t cols,
                  int64_t ld) {
  pack_bf16(tmp, m, rows, cols, ld);
  if (out.size() < size_t(rows * cols)) out.resize(size_t(rows * cols));
  bf16_to_f32(out.data(), tmp.data(), rows * cols);
}

// CBLAS takes int dimensions (32-bit OpenBLAS interface).
int to_blas_int(int64_t v, const char* what) {
  ST_CHECK(v >= 0 && v <= INT_MAX, "gemm: {} = {} does not fit a BLAS int", what, v);
  return int(v);
}

// Row strides must cover the stored width (row-major: op(A) = A^T stores K rows of M).
void check_strides(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  ST_CHECK(lda >= std::max<int64_t>(1, trans_a ? M : K) && ldb >= std::max<int64_t>(1, trans_b ? K : N) &&
               ldc >= std::max<int64_t>(1, N),
           "gemm: strides lda={} ldb={} ldc={} too small for M={} N={} K={} (trans {}{})", lda, ldb, ldc, M, N, K,
           trans_a ? 'T' : 'N', trans_b ? 'T' : 'N');
}

// C = alpha op(A) op(B) + beta C on bf16 operands, by the bf16 kernel
// bf16_operand_products() found.
void bf16_products(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                   const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (onednn_products(GemmPrecision::bf16)) {
    onednn_gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const SbgemmFn fn = sbgemm();
  ST_CHECK(fn != nullptr, "gemm_bf16: no bf16 kernel here (bf16_operand_products() is false)");
  fn(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, to_blas_int(M, "M"),
     to_blas_int(N, "N"), to_blas_int(K, "K"), alpha, reinterpret_cast<const uint16_t*>(A), to_blas_int(lda, "lda"),
     reinterpret_cast<const uint16_t*>(B), to_blas_int(ldb, "ldb"), beta, C, to_blas_int(ldc, "ldc"));
}

// C's rows set to the bias, for a product then added with beta = 1.
void fill_bias_rows(float* C, const float* bias, int64_t M, int64_t N, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, C + i * ldc);
}

// C = beta C for an empty sum (K = 0): beta = 0 writes zeros (never reads C, as BLAS).
void scale_rows(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    if (beta == 0.0f)
      std::fill(row, row + N, 0.0f);
    else
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
  }
}

}  // namespace

// The buffer only grows: resizing it down and up again between products of
// different shapes would zero its new elements at every call.
void pack_bf16(std::vector<bf16>& out, const float* m, int64_t rows, int64_t cols, int64_t ld) {
  if (out.size() < size_t(rows * cols)) out.resize(size_t(rows * cols));
  f32_to_bf16_rows(out.data(), m, rows, cols, ld);
}

GemmRecorder::GemmRecorder() : previous_(t_recorder) { t_recorder = this; }
GemmRecorder::~GemmRecorder() { t_recorder = previous_; }

double GemmRecorder::flops() const {
  double total = 0.0;
  for (const GemmCall& c : calls_) total += c.flops();
  for (const ConvCall& c : convs_) total += c.flops();
  return total;
}

void record_conv(const ConvCall& call) {
  if (t_recorder != nullptr) t_recorder->convs_.push_back(call);
}

void record_gemm(const GemmCall& call) {
  if (t_recorder != nullptr) t_recorder->calls_.push_back(call);
}

void set_blas_threads(int threads) {
  ST_CHECK(threads >= 1, "set_blas_threads: {} threads (must be >= 1)", threads);
  configured_threads() = threads;
  openblas_set_num_threads(threads);
}

std::string blas_core() { return openblas_get_corename(); }

std::string suggested_blas_core(const char* coretype_env, const std::string& core, bool avx2_fma, bool avx512) {
  // A core the user chose is theirs (CI pins Haswell on AVX-512 machines).
  if (coretype_env && *coretype_env) return {};
  if (!avx2_fma) return {};
  std::string lower = core;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  // OpenBLAS's x86-64 cores with AVX2 kernels or wider.
  for (const char* wide : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (lower == wide) return {};
  return avx512 ? "SkylakeX" : "Haswell";
}

namespace {
bool cpu_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
// SkylakeX's kernels use AVX-512 F, BW, DQ and VL.
bool cpu_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
}  // namespace

std::string suggested_blas_core() {
  return suggested_blas_core(std::getenv("OPENBLAS_CORETYPE"), blas_core(), cpu_avx2_fma(), cpu_avx512());
}

std::string blas_core_warning() {
  const std::string better = suggested_blas_core();
  if (better.empty()) return {};
  return fmt::format(
      "OpenBLAS chose its {} kernels (no AVX2) on a CPU with {}: it does not recognize this CPU model, and "
      "GEMMs run several times slower than they could. Start the job with OPENBLAS_CORETYPE={} in its "
      "environment (e.g. `OPENBLAS_CORETYPE={} shardrun ...`)",
      blas_core(), better == "SkylakeX" ? "AVX-512" : "AVX2 and FMA", better, better);
}

void set_gemm_precision(GemmPrecision precision) { g_precision = precision; }
GemmPrecision gemm_precision() { return g_precision; }
bool native_bf16_gemm() { return sbgemm() != nullptr; }
bool bf16_operand_products() {
  return g_precision == GemmPrecision::bf16 && (onednn_products(GemmPrecision::bf16) || sbgemm() != nullptr);
}

int blas_threads() {
  configured_threads();
  return openblas_get_num_threads();
}

namespace {

// gemm()'s products, unrecorded.
void products(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_rows(M, N, beta, C, ldc);
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if (g_precision == GemmPrecision::bf16) {
    // Operands as stored: A is (trans_a ? K x M : M x K), B (trans_b ? N x K : K x N).
    const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    thread_local std::vector<bf16> a16, b16;
    thread_local std::vector<float> a32, b32;
    if (bf16_operand_products()) {
      pack_bf16(a16, A, a_rows, a_cols, lda);
      pack_bf16(b16, B, b_rows, b_cols, ldb);
      bf16_products(trans_a, trans_b, M, N, K, alpha, a16.data(), a_cols, b16.data(), b_cols, beta, C, ldc);
      return;
    }
    pack_rounded(a32, a16, A, a_rows, a_cols, lda);
    pack_rounded(b32, b16, B, b_rows, b_cols, ldb);
    A = a32.data();
    B = b32.data();
    lda = a_cols;
    ldb = b_cols;
  } else if (onednn_products(GemmPrecision::f32)) {
    onednn_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta, tb, to_blas_int(M, "M"), to_blas_int(N, "N"), to_blas_int(K, "K"), alpha, A,
              to_blas_int(lda, "lda"), B, to_blas_int(ldb, "ldb"), beta, C, to_blas_int(ldc, "ldc"));
}

// `count` matrices of rows x cols, `between` floats apart (row stride ld),
// rounded to bf16 into `out` densely: [count, rows, cols].
void pack_bf16_batch(std::vector<bf16>& out, const float* m, int64_t count, int64_t rows, int64_t cols, int64_t ld,
                     int64_t between) {
  const int64_t each = rows * cols;
  if (out.size() < size_t(count * each)) out.resize(size_t(count * each));
  for (int64_t i = 0; i < count; ++i) f32_to_bf16_rows(out.data() + i * each, m + i * between, rows, cols, ld);
}

// The same for operands bf16 already: copied densely.
void pack_bf16_batch(std::vector<bf16>& out, const bf16* m, int64_t count, int64_t rows, int64_t cols, int64_t ld,
                     int64_t between) {
  const int64_t each = rows * cols;
  if (out.size() < size_t(count * each)) out.resize(size_t(count * each));
  for (int64_t i = 0; i < count; ++i)
    for (int64_t r = 0; r < rows; ++r) std::copy_n(m + i * between + r * ld, cols, out.data() + i * each + r * cols);
}

// gemm_batched's and gemm_bf16_batched's start: the call recorded and its
// sizes checked; false where no product has anything to compute.
bool begin_batched(const char* fn, const GemmCall& call) {
  configured_threads();
  ST_CHECK(call.batch >= 0, "{}: count = {} (must be >= 0)", fn, call.batch);
  record_gemm(call);
  if (call.batch == 0 || call.M == 0 || call.N == 0) return false;
  check_strides(call.trans_a, call.trans_b, call.M, call.N, call.K, call.lda, call.ldb, call.ldc);
  ST_CHECK(call.batch == 1 || call.stride_c >= (call.M - 1) * call.ldc + call.N,
           "{}: products {} floats apart would overlap in C ({} x {}, ldc {})", fn, call.stride_c, call.M, call.N,
           call.ldc);
  return true;
}

GemmCall batched_call(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                      float beta, float* C, int64_t ldc, int64_t stride_c, bool bf16_operands) {
  GemmCall call{trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  call.bf16_operands = bf16_operands;
  call.batch = count;
  call.stride_a = stride_a;
  call.stride_b = stride_b;
  call.stride_c = stride_c;
  return call;
}

// A call's operands as stored: rows and columns of A and of B.
struct Stored {
  int64_t a_rows, a_cols, b_rows, b_cols;
  explicit Stored(const GemmCall& c)
      : a_rows(c.trans_a ? c.K : c.M),
        a_cols(c.trans_a ? c.M : c.K),
        b_rows(c.trans_b ? c.N : c.K),
        b_cols(c.trans_b ? c.K : c.N) {}
};

// Whether no two products' A or B overlap (oneDNN describes only such a batch).
bool operands_apart(const GemmCall& c) {
  const Stored s(c);
  return c.batch == 1 ||
         (c.stride_a >= (s.a_rows - 1) * c.lda + s.a_cols && c.stride_b >= (s.b_rows - 1) * c.ldb + s.b_cols);
}

// The batch on dense bf16 copies of its operands (rounded from f32, or
// copied), [count, rows, cols] each, in one oneDNN primitive: any strides,
// overlapping operands included.
template <class T>
void packed_bf16_batch(const GemmCall& c, const T* A, const T* B, float* C) {
  const Stored s(c);
  thread_local std::vector<bf16> a16, b16;
  pack_bf16_batch(a16, A, c.batch, s.a_rows, s.a_cols, c.lda, c.stride_a);
  pack_bf16_batch(b16, B, c.batch, s.b_rows, s.b_cols, c.ldb, c.stride_b);
  onednn_gemm_batched(c.batch, c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, a16.data(), s.a_cols, s.a_rows * s.a_cols,
                      b16.data(), s.b_cols, s.b_rows * s.b_cols, c.beta, C, c.ldc, c.stride_c, true);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  configured_threads();
  record_gemm({trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C});
  if (M == 0 || N == 0) return;
  check_strides(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  products(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_batched(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                  float beta, float* C, int64_t ldc, int64_t stride_c) {
  const GemmCall call = batched_call(count, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta,
                                     C, ldc, stride_c, false);
  if (!begin_batched("gemm_batched", call)) return;
  if (K > 0 && onednn_products(g_precision)) {
    // A shared or overlapping A or B, stride 0 included, is a loop below.
    if (g_precision == GemmPrecision::f32 && operands_apart(call)) {
      onednn_gemm_batched(count, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                          stride_c, false);
      return;
    }
    if (g_precision == GemmPrecision::bf16) {
      packed_bf16_batch(call, A, B, C);
      return;
    }
  }
  for (int64_t i = 0; i < count; ++i)
    products(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c,
             ldc);
}

void gemm_bf16_batched(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const bf16* A, int64_t lda, int64_t stride_a, const bf16* B, int64_t ldb, int64_t stride_b,
                       float beta, float* C, int64_t ldc, int64_t stride_c) {
  const GemmCall call = batched_call(count, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta,
                                     C, ldc, stride_c, true);
  if (!begin_batched("gemm_bf16_batched", call)) return;
  if (K == 0) {
    for (int64_t i = 0; i < count; ++i) scale_rows(M, N, beta, C + i * stride_c, ldc);
    return;
  }
  if (onednn_products(GemmPrecision::bf16)) {
    if (operands_apart(call)) {
      onednn_gemm_batched(count, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                          stride_c, true);
      return;
    }
    packed_bf16_batch(call, A, B, C);  // as gemm_batched packs them: the same primitive, the same bits
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    bf16_products(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                  C + i * stride_c, ldc);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  configured_threads();
  GemmCall call{trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  call.bf16_operands = true;
  record_gemm(call);
  if (M == 0 || N == 0) return;
  check_strides(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (K == 0) return scale_rows(M, N, beta, C, ldc);
  bf16_products(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
               int64_t ldb, const float* bias, float* C, int64_t ldc) {
  configured_threads();
  if (g_precision == GemmPrecision::bf16 || !onednn_products(GemmPrecision::f32) || M == 0 || N == 0 || K == 0) {
    fill_bias_rows(C, bias, M, N, ldc);
    gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
    return;
  }
  GemmCall call{trans_a, trans_b, M, N, K, lda, ldb, ldc, 1.0f, 0.0f, A, B, C};
  call.bias = bias;
  record_gemm(call);
  check_strides(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  onednn_gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, bias);
}

void gemm_bf16_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const bf16* A, int64_t lda,
                    const bf16* B, int64_t ldb, const float* bias, float* C, int64_t ldc) {
  configured_threads();
  if (!onednn_products(GemmPrecision::bf16) || M == 0 || N == 0 || K == 0) {
    fill_bias_rows(C, bias, M, N, ldc);
    gemm_bf16(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
    return;
  }
  GemmCall call{trans_a, trans_b, M, N, K, lda, ldb, ldc, 1.0f, 0.0f, A, B, C};
  call.bf16_operands = true;
  call.bias = bias;
  record_gemm(call);
  check_strides(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  onednn_gemm_bf16(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, bias);
}

}  // namespace shardtrain::cpu
