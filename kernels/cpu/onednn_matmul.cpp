#include "kernels/cpu/onednn_matmul.h"

#include "kernels/cpu/cpu_backend.h"
#include "runtime/core/error.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <tuple>
#include <unordered_map>

namespace shardtrain::cpu {
namespace {

using dnnl::memory;

// Everything a primitive is built from: the transposes, M, N, K, the row
// strides, alpha, beta, bf16 operands, a bias, and the batch's count and the
// three operands' strides between products (all 0 for one product).
using ProductKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, bool,
                              bool, int64_t, int64_t, int64_t, int64_t>;

struct Product {
  dnnl::matmul primitive;
  memory a, b, c, bias;
};

// op(X)'s [rows, cols] as a view of X stored row-major with row stride ld;
// for a batch, `count` of them, `between` elements apart.
memory::desc operand(int64_t rows, int64_t cols, bool trans, int64_t ld, memory::data_type type, int64_t count,
                     int64_t between) {
  const memory::dims strides = trans ? memory::dims{1, ld} : memory::dims{ld, 1};
  if (count == 0) return memory::desc({rows, cols}, type, strides);
  return memory::desc({count, rows, cols}, type, {between, strides[0], strides[1]});
}

Product build(const ProductKey& key) {
  const auto [ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, bf16, has_bias, count, sa, sb, sc] = key;
  const auto type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc a = operand(M, K, ta, lda, type, count, sa), b = operand(K, N, tb, ldb, type, count, sb);
  const memory::desc c = operand(M, N, false, ldc, memory::data_type::f32, count, sc);
  const memory::desc bias({1, N}, memory::data_type::f32, memory::dims{N, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::matmul::primitive_desc pd(has_bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c),
                                          attr, onednn_engine());
    return {dnnl::matmul(pd), memory(a, onednn_engine(), DNNL_MEMORY_NONE),
            memory(b, onednn_engine(), DNNL_MEMORY_NONE), memory(c, onednn_engine(), DNNL_MEMORY_NONE),
            memory(bias, onednn_engine(), DNNL_MEMORY_NONE)};
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("oneDNN has no {} matmul for {}{}x{}x{} (trans {}{}) on this CPU ({}): {}",
                            bf16 ? "bf16" : "f32", count > 0 ? fmt::format("{} x ", count) : "", M, N, K,
                            ta ? 'T' : 'N', tb ? 'T' : 'N', onednn_version(), e.what()));
  }
}

void run(const ProductKey& key, const void* A, const void* B, float* C, const float* bias) {
  match_onednn_threads();
  thread_local std::map<ProductKey, Product> products;
  auto it = products.find(key);
  if (it == products.end()) it = products.emplace(key, build(key)).first;
  Product& p = it->second;
  p.a.set_data_handle(const_cast<void*>(A));
  p.b.set_data_handle(const_cast<void*>(B));
  p.c.set_data_handle(C);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}};
  if (bias != nullptr) {
    p.bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, p.bias);
  }
  p.primitive.execute(onednn_stream(), args);
  onednn_stream().wait();
}

}  // namespace

void onednn_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias) {
  run({trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, false, bias != nullptr, 0, 0, 0, 0}, A, B, C, bias);
}

void onednn_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A,
                      int64_t lda, const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias) {
  run({trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, true, bias != nullptr, 0, 0, 0, 0}, A, B, C, bias);
}

void onednn_gemm_batched(int64_t count, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                         float beta, float* C, int64_t ldc, int64_t stride_c, bool bf16_operands) {
  run({trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, bf16_operands, false, count, stride_a, stride_b,
       stride_c},
      A, B, C, nullptr);
}

}  // namespace shardtrain::cpu
