#include "kernels/cuda/gemm_lt.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace shardtrain::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLAS's recommendation for Hopper

int to_int(int64_t v, const char* what) {
  ST_CUDA_REQUIRE(v >= 0 && v <= INT_MAX,
                  std::string("gemm_lt: ") + what + " = " + std::to_string(v) + " does not fit cuBLASLt's int");
  return int(v);
}

// Everything an algorithm choice depends on. Pointer alignment is part of
// it: an algorithm chosen for 16-byte aligned operands may need them.
struct PlanKey {
  bool trans_a, trans_b;
  int64_t M, N, K, lda, ldb, ldc;
  int precision, epilogue;
  bool beta_zero, c_bf16;
  int alignment;  // the smallest of the operands' alignments, up to 16
  auto tie() const {
    return std::tie(trans_a, trans_b, M, N, K, lda, ldb, ldc, precision, epilogue, beta_zero, c_bf16, alignment);
  }
  bool has_aux() const { return epilogue == int(LtEpilogue::gelu_aux_bias) || epilogue == int(LtEpilogue::dgelu); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool supported = false;
};

struct LtState {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  std::map<PlanKey, Plan> plans;
  LtStats stats;
};

LtState& state() {
  static auto* s = new LtState;  // plans live as long as the process (never destroyed)
  return *s;
}

int alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (int bytes = 16; bytes > 1; bytes /= 2)
    if (a % std::uintptr_t(bytes) == 0) return bytes;
  return 1;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T (gemm.cu):
// cuBLASLt's first operand is our B, its second our A, m = N, n = M. Its
// BIAS epilogue adds a vector over its m (our N: a value per column of our
// row-major C) and BGRADB sums its second operand over k (our A: M values).
// bias and aux: the first call's vectors. The heuristic reads their
// alignment from the pointers (run() admits 16-byte aligned ones only, so
// the algorithm suits every later call's).
Plan make_plan(const PlanKey& k, cudaDataType_t ab_type, cublasComputeType_t compute, float* bias, void* aux) {
  Plan p;
  ST_CUBLAS_CHECK(cublas_api().LtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
  const cublasOperation_t op_first = k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ST_CUBLAS_CHECK(
      cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  ST_CUBLAS_CHECK(
      cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
  if (k.epilogue == int(LtEpilogue::bias)) ep = CUBLASLT_EPILOGUE_BIAS;
  if (k.epilogue == int(LtEpilogue::bias_grad_a)) ep = CUBLASLT_EPILOGUE_BGRADB;
  if (k.epilogue == int(LtEpilogue::gelu_aux_bias)) ep = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (k.epilogue == int(LtEpilogue::dgelu)) ep = CUBLASLT_EPILOGUE_DGELU;
  ST_CUBLAS_CHECK(cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
  if (k.has_aux()) {
    // The aux matrix is laid out as C: column-major [N, M] with ld N; its
    // type is left at the default, C's (cuBLASLt's GELU aux has C's type).
    const auto aux_ld = int64_t(k.N);
    ST_CUBLAS_CHECK(
        cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    ST_CUBLAS_CHECK(
        cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  }
  if (bias != nullptr)
    ST_CUBLAS_CHECK(
        cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_BGRADB || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
    const cudaDataType_t bias_type = CUDA_R_32F;
    ST_CUBLAS_CHECK(cublas_api().LtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                          sizeof(bias_type)));
  }
  // Stored (row-major) shapes read column-major: rows and columns swap.
  const int64_t b_rows = k.trans_b ? k.N : k.K, b_cols = k.trans_b ? k.K : k.N;
  const int64_t a_rows = k.trans_a ? k.K : k.M, a_cols = k.trans_a ? k.M : k.K;
  ST_CUBLAS_CHECK(cublas_api().LtMatrixLayoutCreate(&p.first, ab_type, uint64_t(b_cols), uint64_t(b_rows), k.ldb));
  ST_CUBLAS_CHECK(cublas_api().LtMatrixLayoutCreate(&p.second, ab_type, uint64_t(a_cols), uint64_t(a_rows), k.lda));
  ST_CUBLAS_CHECK(cublas_api().LtMatrixLayoutCreate(&p.out, k.c_bf16 ? CUDA_R_16BF : CUDA_R_32F, uint64_t(k.N),
                                                    uint64_t(k.M), k.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  ST_CUBLAS_CHECK(cublas_api().LtMatmulPreferenceCreate(&pref));
  const size_t workspace = kWorkspaceBytes;
  ST_CUBLAS_CHECK(cublas_api().LtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                              &workspace, sizeof(workspace)));
  for (const auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    const auto align = uint32_t(k.alignment);
    ST_CUBLAS_CHECK(cublas_api().LtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublas_api().LtMatmulAlgoGetHeuristic(state().handle, p.desc, p.first, p.second, p.out,
                                                                  p.out, pref, 1, &result, &found);
  cublas_api().LtMatmulPreferenceDestroy(pref);
  p.supported = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (p.supported) p.algo = result.algo;
  return p;
}

// gemm_lt, and with `packed` gemm_lt_packed: A and B are bf16 copies
// already (ld = lda, ldb), used as they are; C (and aux) bf16 where c_bf16.
bool run(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda, const void* B,
         int64_t ldb, float beta, void* C, int64_t ldc, LtEpilogue epilogue, float* bias, void* aux, bool packed,
         bool c_bf16) {
  if (M == 0 || N == 0 || K == 0) return false;  // gemm() handles the empty cases
  to_int(M, "M");
  to_int(N, "N");
  to_int(K, "K");
  ST_CUDA_REQUIRE(A != nullptr && B != nullptr && C != nullptr, "gemm_lt: A, B or C is null");
  const bool gelu = epilogue == LtEpilogue::gelu_aux_bias || epilogue == LtEpilogue::dgelu;
  const bool uses_bias = epilogue != LtEpilogue::none && epilogue != LtEpilogue::dgelu;
  ST_CUDA_REQUIRE(!uses_bias || bias != nullptr, "gemm_lt: an epilogue without its bias vector");
  ST_CUDA_REQUIRE(!gelu || aux != nullptr, "gemm_lt: a GELU epilogue without its aux matrix");
  const GemmPrecision precision = packed ? GemmPrecision::bf16 : gemm_precision();
  const bool bf16 = precision == GemmPrecision::bf16;
  ST_CUDA_REQUIRE(!c_bf16 || (packed && beta == 0.0f), "gemm_lt: a bf16 C needs packed operands and beta 0");
  LtState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.handle == nullptr) ST_CUBLAS_CHECK(cublas_api().LtCreate(&s.handle));
  ++s.stats.calls;
  // cuBLASLt's epilogues read and write the bias vector 16 bytes at a time
  // (a bias at another offset of the flat parameters fails at run time).
  // The GELU's aux matrix likewise, and its ld must be a multiple of 8.
  if ((uses_bias && alignment_of(bias) < 16) || (gelu && (alignment_of(aux) < 16 || N % 8 != 0))) {
    ++s.stats.unsupported;
    return false;
  }

  // Copies packed here are the scratch's own (aligned, ld = width).
  int alignment = alignment_of(C);
  if (!bf16 || packed) alignment = std::min({alignment, alignment_of(A), alignment_of(B)});
  const bool packs = bf16 && !packed;
  const int64_t lda_used = packs ? (trans_a ? M : K) : lda, ldb_used = packs ? (trans_b ? K : N) : ldb;
  const PlanKey key{trans_a,       trans_b,      M,      N,        K, lda_used, ldb_used, ldc, int(precision),
                    int(epilogue), beta == 0.0f, c_bf16, alignment};
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    const cublasComputeType_t compute =
        precision == GemmPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    it = s.plans
             .emplace(key, make_plan(key, bf16 ? CUDA_R_16BF : CUDA_R_32F, compute, uses_bias ? bias : nullptr,
                                     gelu ? aux : nullptr))
             .first;
    ++s.stats.plans;
  }
  Plan& plan = it->second;
  if (!plan.supported) {
    ++s.stats.unsupported;
    return false;
  }
  const auto operand = [&](const void* X, int64_t rows, int64_t cols, int64_t ld, ScratchSlot slot) {
    return packed ? GemmOperand{X, ld, 0}
                  : gemm_operand(static_cast<const float*>(X), rows, cols, ld, 0, 1, bf16, slot);
  };
  const GemmOperand a = operand(A, trans_a ? K : M, trans_a ? M : K, lda, ScratchSlot::gemm_a);
  const GemmOperand b = operand(B, trans_b ? N : K, trans_b ? K : N, ldb, ScratchSlot::gemm_b);
  if (uses_bias)
    ST_CUBLAS_CHECK(
        cublas_api().LtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (gelu)
    ST_CUBLAS_CHECK(
        cublas_api().LtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  void* workspace = scratch(ScratchSlot::lt_workspace, kWorkspaceBytes);
  const float alpha = 1.0f;
  ST_CUBLAS_CHECK(cublas_api().LtMatmul(s.handle, plan.desc, &alpha, b.ptr, plan.first, a.ptr, plan.second, &beta, C,
                                        plan.out, C, plan.out, &plan.algo, workspace, kWorkspaceBytes,
                                        compute_stream()));
  return true;
}

}  // namespace

bool gemm_lt(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float beta, float* C, int64_t ldc, LtEpilogue epilogue, float* bias, float* aux) {
  return run(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue, bias, aux, /*packed=*/false,
             /*c_bf16=*/false);
}

bool gemm_lt_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const GemmOperand& a,
                    const GemmOperand& b, float beta, void* C, int64_t ldc, LtEpilogue epilogue, float* bias, void* aux,
                    bool c_bf16) {
  return run(trans_a, trans_b, M, N, K, a.ptr, a.ld, b.ptr, b.ld, beta, C, ldc, epilogue, bias, aux, /*packed=*/true,
             c_bf16);
}

LtStats gemm_lt_stats() {
  LtState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.stats;
}

}  // namespace shardtrain::cuda
