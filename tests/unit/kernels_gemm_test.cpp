#include "kernels/cpu/gemm.h"

#include "kernels/cpu/elementwise.h"
#include "runtime/core/dtype.h"
#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <thread>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::uniform_vector;

// gemm(ta, tb, M, N, K)'s operands as stored, each row `pad` floats longer
// than the matrix: A is [M,K] or [K,M], B is [K,N] or [N,K].
struct Stored {
  int64_t a_rows, lda, b_rows, ldb, ldc;
};
Stored stored(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad) {
  return {ta ? K : M, (ta ? M : K) + pad, tb ? N : K, (tb ? K : N) + pad, N + pad};
}

// C[i,j] = alpha * sum_k op(A)[i,k] op(B)[k,j] + beta * C[i,j], in double.
std::vector<double> naive_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                               const std::vector<float>& A, int64_t lda, const std::vector<float>& B, int64_t ldb,
                               float beta, const std::vector<float>& C, int64_t ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[k * lda + i] : A[i * lda + k];
        const double b = tb ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
      }
      out[i * ldc + j] = alpha * s + beta * double(C[i * ldc + j]);
    }
  return out;
}

// Every transpose combination, padded strides, odd shapes (a row, a column,
// sizes that are no multiple of any vector width) and scalars (alpha and
// beta of 1, 0 and others), on OpenBLAS and on oneDNN.
TEST(Gemm, AllTransposeCombinationsWithPaddedStrides) {
  struct Case {
    int64_t M, N, K, pad;
    float alpha, beta;
  };
  const Case cases[] = {{5, 7, 3, 3, 0.5f, -1.5f},
                        {1, 9, 17, 1, 1.0f, 0.0f},
                        {13, 1, 5, 2, 1.0f, 1.0f},
                        {37, 65, 129, 5, 2.0f, 0.25f},
                        {8, 8, 8, 0, 1.0f, 1.0f}};
  for (const cpu::CpuBackend backend : testing::kCpuBackends) {
    const testing::ScopedCpuBackend scoped(backend);
    for (const Case& c : cases)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          // Each row's `pad` extra floats the GEMM must neither read into the
          // result nor write.
          const auto [a_rows, lda, b_rows, ldb, ldc] = stored(ta, tb, c.M, c.N, c.K, c.pad);
          const auto A = uniform_vector(size_t(a_rows * lda), 1);
          const auto B = uniform_vector(size_t(b_rows * ldb), 2);
          auto C = uniform_vector(size_t(c.M * ldc), 3);
          const auto expected = naive_gemm(ta, tb, c.M, c.N, c.K, c.alpha, A, lda, B, ldb, c.beta, C, ldc);
          gemm(ta, tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc);
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < ldc; ++j)
              ASSERT_NEAR(C[i * ldc + j], expected[i * ldc + j], 1e-5 * std::sqrt(double(c.K)))
                  << name_of(backend) << " " << c.M << "x" << c.N << "x" << c.K << " trans " << ta << tb << " at " << i
                  << "," << j;
        }
  }
}

// A seed's results are the same bits in every run: a product repeated on
// one backend gives the same bits (one thread, a fixed blocking).
TEST(Gemm, RepeatedProductsAreBitIdentical) {
  const int64_t M = 33, N = 47, K = 300;
  const auto A = uniform_vector(size_t(M * K), 21), B = uniform_vector(size_t(K * N), 22);
  for (const cpu::CpuBackend backend : testing::kCpuBackends) {
    const testing::ScopedCpuBackend scoped(backend);
    std::vector<float> C1(size_t(M * N)), C2(size_t(M * N), 7.0f);
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C1.data(), N);
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C2.data(), N);
    EXPECT_EQ(C1, C2) << name_of(backend);
  }
}

// bf16 precision: the product of the operands rounded to bf16 (nearest
// even), summed in f32: against a double reference over the rounded
// operands it is f32-exact (1e-5); against the unrounded operands it is off
// by bf16's 2^-8 relative rounding (here < 1e-2 of the largest entry).
TEST(Gemm, Bf16PrecisionMultipliesRoundedOperands) {
  const int64_t M = 9, N = 11, K = 64, pad = 2;
  struct Restore {
    ~Restore() { set_gemm_precision(GemmPrecision::f32); }
  } restore;
  for (const cpu::CpuBackend backend : testing::kCpuBackends)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const auto [a_rows, lda, b_rows, ldb, ldc] = stored(ta, tb, M, N, K, pad);
        const auto A = uniform_vector(size_t(a_rows * lda), 4);
        const auto B = uniform_vector(size_t(b_rows * ldb), 5);
        auto round = [](std::vector<float> v) {
          for (float& x : v) x = to_f32(to_bf16(x));
          return v;
        };
        const auto C0 = uniform_vector(size_t(M * ldc), 6);
        const auto exact_rounded = naive_gemm(ta, tb, M, N, K, 1.0f, round(A), lda, round(B), ldb, 0.5f, C0, ldc);
        const auto exact = naive_gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.5f, C0, ldc);
        auto C = C0;
        const testing::ScopedCpuBackend scoped(backend);
        set_gemm_precision(GemmPrecision::bf16);
        gemm(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.5f, C.data(), ldc);
        set_gemm_precision(GemmPrecision::f32);
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            EXPECT_NEAR(C[i * ldc + j], exact_rounded[i * ldc + j], 1e-5) << ta << tb << " " << i << "," << j;
            worst = std::max(worst, std::fabs(C[i * ldc + j] - exact[i * ldc + j]));
            scale = std::max(scale, std::fabs(exact[i * ldc + j]));
          }
        EXPECT_GT(worst, 0.0);  // the operands were rounded
        EXPECT_LT(worst, 1e-2 * scale);
      }
  std::cout << "[gemm] bf16 products through " << (native_bf16_gemm() ? "cblas_sbgemm" : "the f32 fallback")
            << " and, with runtime.cpu_backend = onednn, "
            << (onednn_native_bf16() ? "oneDNN's bf16 matmul" : "the same (no bf16 kernels in oneDNN here)") << "\n";
}

TEST(Gemm, BetaZeroOverwritesGarbage) {
  const int64_t M = 4, N = 6, K = 5;
  const auto A = uniform_vector(M * K, 4), B = uniform_vector(K * N, 5);
  const auto expected = naive_gemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, std::vector<float>(M * N, 0.0f), N);
  for (const cpu::CpuBackend backend : testing::kCpuBackends) {
    const testing::ScopedCpuBackend scoped(backend);
    std::vector<float> C(M * N, std::numeric_limits<float>::quiet_NaN());
    gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
    for (size_t i = 0; i < C.size(); ++i) EXPECT_NEAR(C[i], expected[i], 1e-5) << name_of(backend) << " " << i;
  }
}

// gemm_bias: every row gets the bias, over garbage in C and with C's rows
// padded (the padding untouched), on both backends; where oneDNN adds the
// bias in its epilogue the call is recorded with it, as the replay needs.
TEST(Gemm, BiasIsAddedToEveryRowAndRecorded) {
  const int64_t M = 37, N = 65, K = 19, ldc = N + 3;
  const auto A = uniform_vector(M * K, 21), B = uniform_vector(N * K, 22), bias = uniform_vector(N, 23);
  std::vector<float> rows(size_t(M * ldc), 0.0f);
  for (int64_t i = 0; i < M; ++i) std::copy(bias.begin(), bias.end(), rows.begin() + i * ldc);
  const auto expected = naive_gemm(false, true, M, N, K, 1.0f, A, K, B, K, 1.0f, rows, ldc);
  for (const cpu::CpuBackend backend : testing::kCpuBackends) {
    const testing::ScopedCpuBackend scoped(backend);
    std::vector<float> C(size_t(M * ldc), std::numeric_limits<float>::quiet_NaN());
    for (int64_t i = 0; i < M; ++i) C[size_t(i * ldc + N)] = 7.0f;  // padding
    GemmRecorder recorder;
    gemm_bias(false, true, M, N, K, A.data(), K, B.data(), K, bias.data(), C.data(), ldc);
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j)
        EXPECT_NEAR(C[size_t(i * ldc + j)], expected[size_t(i * ldc + j)], 1e-5) << name_of(backend) << " " << i;
      EXPECT_EQ(C[size_t(i * ldc + N)], 7.0f) << name_of(backend) << " row " << i;
    }
    ASSERT_EQ(recorder.calls().size(), 1u) << name_of(backend);
    const GemmCall& call = recorder.calls()[0];
    EXPECT_EQ(call.bias != nullptr, onednn_products(GemmPrecision::f32)) << name_of(backend);
    EXPECT_EQ(call.beta, call.bias != nullptr ? 0.0f : 1.0f) << name_of(backend);
  }
}

// gemm_bf16_bias: the bias added to every row of the bf16 operands'
// product, the same bits as rows set to the bias and the product added with
// beta = 1; where oneDNN computes it, in its epilogue and recorded so.
TEST(Gemm, Bf16BiasIsAddedToEveryRowAndRecorded) {
  const testing::ScopedBf16Products bf16_products;
  const int64_t M = 37, N = 65, K = 19, ldc = N + 3;
  std::vector<bf16> A(size_t(M * K)), B(size_t(N * K));
  const auto a = uniform_vector(M * K, 24), b = uniform_vector(N * K, 25), bias = uniform_vector(N, 26);
  f32_to_bf16(A.data(), a.data(), int64_t(A.size()));
  f32_to_bf16(B.data(), b.data(), int64_t(B.size()));
  for (const cpu::CpuBackend backend : testing::kCpuBackends) {
    const testing::ScopedCpuBackend scoped(backend);
    if (!bf16_operand_products()) continue;
    std::vector<float> want(size_t(M * ldc), 7.0f);
    for (int64_t i = 0; i < M; ++i) std::copy(bias.begin(), bias.end(), want.begin() + i * ldc);
    gemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 1.0f, want.data(), ldc);
    std::vector<float> C(size_t(M * ldc), std::numeric_limits<float>::quiet_NaN());
    for (int64_t i = 0; i < M; ++i) C[size_t(i * ldc + N)] = 7.0f;  // padding
    GemmRecorder recorder;
    gemm_bf16_bias(false, true, M, N, K, A.data(), K, B.data(), K, bias.data(), C.data(), ldc);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j <= N; ++j)
        ASSERT_EQ(C[size_t(i * ldc + j)], want[size_t(i * ldc + j)]) << name_of(backend) << " " << i << " " << j;
    ASSERT_EQ(recorder.calls().size(), backend == cpu::CpuBackend::onednn ? 1u : 2u) << name_of(backend);
    const GemmCall& call = recorder.calls().back();
    EXPECT_TRUE(call.bf16_operands);
    EXPECT_EQ(call.bias != nullptr, backend == cpu::CpuBackend::onednn) << name_of(backend);
  }
}

// gemm_batched: each product of the batch as gemm() computes it alone, on
// both backends and in both precisions, for every transpose combination,
// with padded rows and gaps between the products (the padding and gaps
// untouched), and dense products too (oneDNN's brgemm layout); recorded as
// one call whose FLOPs are the batch's.
TEST(Gemm, BatchedProductsMatchOneGemmEach) {
  const int64_t count = 5, M = 13, N = 9, K = 21;
  struct Restore {
    ~Restore() { set_gemm_precision(GemmPrecision::f32); }
  } restore;
  for (const GemmPrecision precision : {GemmPrecision::f32, GemmPrecision::bf16})
    for (const cpu::CpuBackend backend : testing::kCpuBackends)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (int64_t pad : {0, 3}) {
            const auto [a_rows, lda, b_rows, ldb, ldc] = stored(ta, tb, M, N, K, pad);
            const int64_t sa = a_rows * lda + 2 * pad, sb = b_rows * ldb + pad, sc = M * ldc + pad;
            const auto A = uniform_vector(size_t(count * sa), 31), B = uniform_vector(size_t(count * sb), 32);
            const auto C0 = uniform_vector(size_t(count * sc), 33);
            const testing::ScopedCpuBackend scoped(backend);
            set_gemm_precision(precision);
            auto expected = C0;
            for (int64_t i = 0; i < count; ++i)
              gemm(ta, tb, M, N, K, 0.75f, A.data() + i * sa, lda, B.data() + i * sb, ldb, -0.5f,
                   expected.data() + i * sc, ldc);
            auto C = C0;
            GemmRecorder recorder;
            gemm_batched(count, ta, tb, M, N, K, 0.75f, A.data(), lda, sa, B.data(), ldb, sb, -0.5f, C.data(), ldc, sc);
            set_gemm_precision(GemmPrecision::f32);
            const std::string where =
                fmt::format("{} {} {}{} pad {}", precision == GemmPrecision::bf16 ? "bf16" : "f32", name_of(backend),
                            ta ? 'T' : 'N', tb ? 'T' : 'N', pad);
            for (size_t i = 0; i < C.size(); ++i) {
              const int64_t in_product = int64_t(i) % sc, row = in_product / ldc, col = in_product % ldc;
              if (row >= M || col >= N)
                ASSERT_EQ(C[i], C0[i]) << where << " touched padding at " << i;
              else
                ASSERT_NEAR(C[i], expected[i], 1e-5 * K) << where << " at " << i;
            }
            ASSERT_EQ(recorder.calls().size(), 1u) << where;
            const GemmCall& call = recorder.calls()[0];
            EXPECT_EQ(call.batch, count);
            EXPECT_EQ(call.stride_a, sa);
            EXPECT_EQ(call.stride_c, sc);
            EXPECT_DOUBLE_EQ(call.flops(), 2.0 * count * M * N * K);
          }
}

// A stride of 0 shares one B among the products (oneDNN cannot describe
// that batch; gemm_batched then makes one product at a time).
TEST(Gemm, BatchedProductsMayShareAnOperand) {
  const int64_t count = 3, M = 4, N = 6, K = 5;
  const auto A = uniform_vector(size_t(count * M * K), 41), B = uniform_vector(size_t(K * N), 42);
  struct Restore {
    ~Restore() { set_gemm_precision(GemmPrecision::f32); }
  } restore;
  for (const GemmPrecision precision : {GemmPrecision::f32, GemmPrecision::bf16})
    for (const cpu::CpuBackend backend : testing::kCpuBackends) {
      const testing::ScopedCpuBackend scoped(backend);
      set_gemm_precision(precision);
      std::vector<float> expected(size_t(count * M * N)), C(expected.size());
      for (int64_t i = 0; i < count; ++i)
        gemm(false, false, M, N, K, 1.0f, A.data() + i * M * K, K, B.data(), N, 0.0f, expected.data() + i * M * N, N);
      gemm_batched(count, false, false, M, N, K, 1.0f, A.data(), K, M * K, B.data(), N, 0, 0.0f, C.data(), N, M * N);
      set_gemm_precision(GemmPrecision::f32);
      for (size_t i = 0; i < C.size(); ++i) ASSERT_NEAR(C[i], expected[i], 1e-5) << name_of(backend) << " " << i;
    }
}

// gemm_bf16_batched on operands rounded beforehand: the bits of
// gemm_batched in bf16 precision on their f32 values, in every transpose
// combination with padded rows and gaps, with a shared operand (stride 0:
// one product at a time), and for an empty sum; recorded as one call of
// bf16 operands.
TEST(Gemm, Bf16BatchedProductsAreGemmBatchedInBf16) {
  const testing::ScopedBf16Products bf16_products;
  if (!bf16_operand_products()) GTEST_SKIP() << "no bf16 products on this CPU";
  const int64_t count = 4, M = 11, N = 7, K = 19;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t pad : {0, 3})
        for (bool shared_b : {false, true}) {
          const auto [a_rows, lda, b_rows, ldb, ldc] = stored(ta, tb, M, N, K, pad);
          const int64_t sa = a_rows * lda + pad, sb = shared_b ? 0 : b_rows * ldb + 2 * pad, sc = M * ldc + pad;
          const auto A = uniform_vector(size_t(count * sa), 51),
                     B = uniform_vector(size_t((count - 1) * sb + b_rows * ldb), 52);
          std::vector<bf16> A16(A.size()), B16(B.size());
          f32_to_bf16(A16.data(), A.data(), int64_t(A.size()));
          f32_to_bf16(B16.data(), B.data(), int64_t(B.size()));
          const auto C0 = uniform_vector(size_t(count * sc), 53);
          auto expected = C0, C = C0;
          gemm_batched(count, ta, tb, M, N, K, 0.5f, A.data(), lda, sa, B.data(), ldb, sb, 0.25f, expected.data(), ldc,
                       sc);
          GemmRecorder recorder;
          gemm_bf16_batched(count, ta, tb, M, N, K, 0.5f, A16.data(), lda, sa, B16.data(), ldb, sb, 0.25f, C.data(),
                            ldc, sc);
          const std::string where =
              fmt::format("{}{} pad {}{}", ta ? 'T' : 'N', tb ? 'T' : 'N', pad, shared_b ? " shared B" : "");
          ASSERT_EQ(std::memcmp(C.data(), expected.data(), C.size() * sizeof(float)), 0) << where;
          ASSERT_EQ(recorder.calls().size(), 1u) << where;
          EXPECT_TRUE(recorder.calls()[0].bf16_operands) << where;
          EXPECT_EQ(recorder.calls()[0].batch, count) << where;
        }
  std::vector<float> C = {1, 2, 3, 4};
  gemm_bf16_batched(2, false, false, 1, 2, 0, 1.0f, nullptr, 1, 0, nullptr, 2, 0, 0.5f, C.data(), 2, 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1, 1.5f, 2}));
}

TEST(Gemm, BatchedProductsThatWouldOverlapAreAnError) {
  std::vector<float> A(64, 1.0f), B(64, 1.0f), C(64);
  EXPECT_THROW(gemm_batched(2, false, false, 2, 2, 2, 1.0f, A.data(), 2, 4, B.data(), 2, 4, 0.0f, C.data(), 2, 3),
               Error);
  EXPECT_THROW(gemm_batched(-1, false, false, 2, 2, 2, 1.0f, A.data(), 2, 4, B.data(), 2, 4, 0.0f, C.data(), 2, 4),
               Error);
}

TEST(Gemm, EmptySumScalesCByBeta) {
  std::vector<float> C = {1, 2, 3, 4, 5, 6};
  gemm(false, false, 2, 3, 0, 1.0f, nullptr, 1, nullptr, 3, 0.5f, C.data(), 3);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  // beta = 0 writes zeros without reading C (NaN garbage included).
  std::vector<float> D(6, std::numeric_limits<float>::quiet_NaN());
  gemm(true, true, 2, 3, 0, 1.0f, nullptr, 2, nullptr, 1, 0.0f, D.data(), 3);
  EXPECT_EQ(D, std::vector<float>(6, 0.0f));
}

TEST(Gemm, EmptyOutputIsANoOp) {
  std::vector<float> C = {7, 8, 9};
  gemm(false, false, 0, 3, 4, 1.0f, nullptr, 4, nullptr, 3, 0.0f, C.data(), 3);
  gemm(false, false, 1, 0, 4, 1.0f, nullptr, 4, nullptr, 1, 0.0f, C.data(), 1);
  EXPECT_EQ(C, (std::vector<float>{7, 8, 9}));
}

TEST(Gemm, StridesSmallerThanTheRowAreAnError) {
  std::vector<float> A(6), B(6), C(4);
  EXPECT_THROW(gemm(false, false, 2, 2, 3, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2), Error);
}

TEST(Gemm, OneBlasThreadByDefaultAndConfigurable) {
  EXPECT_EQ(blas_threads(), 1);
  set_blas_threads(2);
  EXPECT_EQ(blas_threads(), 2);
  set_blas_threads(1);
  EXPECT_EQ(blas_threads(), 1);
  EXPECT_THROW(set_blas_threads(0), Error);
}

void tiny_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  std::vector<float> A(size_t(M * K), 1.0f), B(size_t(K * N), 1.0f), C(size_t(M * N));
  const int64_t lda = std::max<int64_t>(1, ta ? M : K), ldb = std::max<int64_t>(1, tb ? K : N);
  gemm(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
}

TEST(GemmRecorder, RecordsShapesNestsAndStops) {
  tiny_gemm(false, false, 1, 1, 1);  // before any recorder: recorded nowhere
  GemmRecorder outer;
  tiny_gemm(false, true, 2, 3, 4);
  {
    GemmRecorder inner;
    tiny_gemm(true, false, 5, 6, 7);
    tiny_gemm(true, true, 1, 2, 0);  // an empty sum is still a call
    ASSERT_EQ(inner.calls().size(), 2u);
    EXPECT_TRUE(inner.calls()[0].trans_a);
    EXPECT_FALSE(inner.calls()[0].trans_b);
    EXPECT_EQ(inner.calls()[0].M, 5);
    EXPECT_EQ(inner.calls()[0].N, 6);
    EXPECT_EQ(inner.calls()[0].K, 7);
    EXPECT_DOUBLE_EQ(inner.calls()[0].flops(), 2.0 * 5 * 6 * 7);
    EXPECT_EQ(inner.calls()[1].K, 0);
  }
  // The inner recorder is gone: calls go to the outer one again.
  tiny_gemm(false, false, 8, 9, 10);
  ASSERT_EQ(outer.calls().size(), 2u);
  EXPECT_FALSE(outer.calls()[0].trans_a);
  EXPECT_TRUE(outer.calls()[0].trans_b);
  EXPECT_EQ(outer.calls()[0].M, 2);
  EXPECT_EQ(outer.calls()[1].M, 8);
  EXPECT_EQ(outer.calls()[1].K, 10);
}

TEST(GemmRecorder, IsPerThread) {
  GemmRecorder recorder;
  std::thread other([] { tiny_gemm(false, false, 3, 3, 3); });
  other.join();
  EXPECT_TRUE(recorder.calls().empty());
}

TEST(GemmRecorder, RecordsNothingAfterDestruction) {
  std::vector<GemmCall> seen;
  {
    GemmRecorder r;
    tiny_gemm(false, false, 2, 2, 2);
    seen = r.calls();
  }
  tiny_gemm(false, false, 3, 3, 3);  // must not touch the destroyed recorder
  GemmRecorder fresh;
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_TRUE(fresh.calls().empty());
}

// The core to restart with when OpenBLAS runs a generic one on a CPU with
// AVX2/AVX-512 (the pure function: this test leaves OPENBLAS_CORETYPE alone).
TEST(BlasCore, SuggestedOnlyForAGenericCoreTheUserDidNotChoose) {
  EXPECT_EQ(suggested_blas_core(nullptr, "Prescott", true, true), "SkylakeX");
  EXPECT_EQ(suggested_blas_core(nullptr, "Core2", true, false), "Haswell");
  EXPECT_EQ(suggested_blas_core("", "Nehalem", true, false), "Haswell");   // set but empty: not a choice
  EXPECT_EQ(suggested_blas_core("Prescott", "Prescott", true, true), "");  // the user's choice
  EXPECT_EQ(suggested_blas_core(nullptr, "Haswell", true, true), "");      // AVX2 kernels: left alone
  EXPECT_EQ(suggested_blas_core(nullptr, "SKYLAKEX", true, true), "");     // any case
  EXPECT_EQ(suggested_blas_core(nullptr, "Prescott", false, false), "");   // nothing better exists
  // This process's own answers agree with each other.
  const std::string mine = suggested_blas_core(), warning = blas_core_warning();
  EXPECT_EQ(mine.empty(), warning.empty()) << warning;
  if (!mine.empty()) {
    EXPECT_NE(warning.find("OPENBLAS_CORETYPE=" + mine), std::string::npos) << warning;
  }
}

}  // namespace
}  // namespace shardtrain::cpu

namespace shardtrain::cpu {
namespace {

// Where a product runs depends on the setting, the precision, the CPU and
// whether it is one of im2col's, never on timings.
TEST(CpuBackend, ProductRouteFollowsTheSettingTheCpuAndIm2col) {
  {
    const testing::ScopedCpuBackend scoped(CpuBackend::openblas);
    EXPECT_FALSE(onednn_products(GemmPrecision::f32));
    EXPECT_FALSE(onednn_products(GemmPrecision::bf16));
  }
  {
    const testing::ScopedCpuBackend scoped(CpuBackend::onednn);
    EXPECT_TRUE(onednn_products(GemmPrecision::f32));
    const Im2colProducts im2col;  // an explicit setting is kept in im2col too
    EXPECT_TRUE(onednn_products(GemmPrecision::f32));
  }
  const testing::ScopedCpuBackend scoped(CpuBackend::automatic);
  EXPECT_EQ(onednn_products(GemmPrecision::f32), onednn_avx512());
  EXPECT_EQ(onednn_products(GemmPrecision::bf16), onednn_native_bf16());
  {
    const Im2colProducts im2col;
    EXPECT_FALSE(onednn_products(GemmPrecision::f32));
    EXPECT_EQ(onednn_products(GemmPrecision::bf16), onednn_native_bf16());
    { const Im2colProducts nested; }
    EXPECT_FALSE(onednn_products(GemmPrecision::f32));  // the outer scope still holds
  }
  EXPECT_EQ(onednn_products(GemmPrecision::f32), onednn_avx512());
}

}  // namespace
}  // namespace shardtrain::cpu
