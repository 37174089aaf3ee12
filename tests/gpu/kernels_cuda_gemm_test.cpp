// The GEMM-based CUDA kernels (kernels/cuda/gemm, linear, conv2d, attention)
// against their CPU references, on random inputs, at every GEMM precision.
// Outputs start poisoned (NaN) so that an element a kernel fails to write
// fails the comparison. Skips without a CUDA device.
#include "tests/gpu/gpu_test_util.h"

#ifdef SHARDTRAIN_HAVE_CUDA

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/linear.h"

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

namespace shardtrain {
namespace {

using gpu_test::gpu;
using gpu_test::poisoned;
using gpu_test::random_host;
using gpu_test::rel_error;
using gpu_test::report;

struct Precision {
  cuda::GemmPrecision value;
  const char* name;
  double limit;
};
const Precision kPrecisions[] = {
    {cuda::GemmPrecision::f32, "f32", gpu_test::kLimitF32},
    {cuda::GemmPrecision::tf32, "tf32", gpu_test::kLimitTf32},
    {cuda::GemmPrecision::bf16, "bf16", gpu_test::kLimitBf16},
};

// Puts the GEMM precision back to f32 when a test ends, failed or not.
struct RestoreF32 {
  ~RestoreF32() { cuda::set_gemm_precision(cuda::GemmPrecision::f32); }
};

Tensor dev(const Tensor& host) { return to_device(host, gpu()); }

Tensor host_copy(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape());
  std::copy(t.f32(), t.f32() + t.numel(), c.f32());
  return c;
}

// One (batched) GEMM case: the CPU reference loops cpu::gemm over the batch;
// the GPU runs cuda::gemm (batch 1) or cuda::gemm_strided_batched. With
// beta == 0 C starts poisoned (and must not be read); otherwise both start
// from the same random C, padding included.
struct GemmCase {
  std::string name;
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

void check_gemm(const GemmCase& g, uint64_t seed) {
  const int64_t rows_a = g.ta ? g.K : g.M, rows_b = g.tb ? g.N : g.K;
  const int64_t size_a = (g.batch - 1) * g.stride_a + rows_a * g.lda;
  const int64_t size_b = (g.batch - 1) * g.stride_b + rows_b * g.ldb;
  const int64_t size_c = (g.batch - 1) * g.stride_c + g.M * g.ldc;
  const Tensor a = random_host({size_a}, seed + 1), b = random_host({size_b}, seed + 2);
  const Tensor c0 = random_host({size_c}, seed + 3);
  Tensor want = host_copy(c0);
  for (int64_t i = 0; i < g.batch; ++i)
    cpu::gemm(g.ta, g.tb, g.M, g.N, g.K, g.alpha, a.f32() + i * g.stride_a, g.lda, b.f32() + i * g.stride_b, g.ldb,
              g.beta, want.f32() + i * g.stride_c, g.ldc);
  const Tensor da = dev(a), db = dev(b);
  for (const Precision& p : kPrecisions) {
    cuda::set_gemm_precision(p.value);
    // beta == 0: the matrices' elements poisoned (they must be written and
    // never read), the row padding between them left as in the reference.
    Tensor c_start = host_copy(c0);
    if (g.beta == 0.0f)
      for (int64_t i = 0; i < g.batch; ++i)
        for (int64_t r = 0; r < g.M; ++r)
          std::memset(c_start.f32() + i * g.stride_c + r * g.ldc, 0xFF, size_t(g.N) * sizeof(float));
    const Tensor dc = dev(c_start);
    if (g.batch == 1)
      cuda::gemm(g.ta, g.tb, g.M, g.N, g.K, g.alpha, da.f32(), g.lda, db.f32(), g.ldb, g.beta, dc.f32(), g.ldc);
    else
      cuda::gemm_strided_batched(g.ta, g.tb, g.M, g.N, g.K, g.alpha, da.f32(), g.lda, g.stride_a, db.f32(), g.ldb,
                                 g.stride_b, g.beta, dc.f32(), g.ldc, g.stride_c, g.batch);
    report(g.name, p.name, rel_error(dc, want), p.limit);
  }
}

std::string trans_name(bool ta, bool tb) { return std::string(ta ? "T" : "N") + (tb ? "T" : "N"); }

TEST(CudaGemm, MatchesCpuForAllTransposesAndStrides) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  const int64_t M = 512, N = 768, K = 1024;
  uint64_t seed = 1000;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t cols_a = ta ? M : K, cols_b = tb ? K : N;
      // Tight strides, beta = 0 over a poisoned C.
      check_gemm({"gemm_" + trans_name(ta, tb), ta, tb, M, N, K, cols_a, cols_b, N, 1.0f, 0.0f}, seed += 10);
      // Padded row strides, alpha and beta in play.
      check_gemm({"gemm_" + trans_name(ta, tb) + "_ld", ta, tb, M, N, K, cols_a + 7, cols_b + 5, N + 3, 0.75f, 0.5f},
                 seed += 10);
    }
  // K = 0: an empty sum; beta = 0 writes zeros without reading C.
  check_gemm({"gemm_K0", false, false, 5, 7, 0, 1, 7, 7, 1.0f, 0.0f}, seed += 10);
}

TEST(CudaGemm, StridedBatchedMatchesCpuLoop) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  const int64_t batch = 8, M = 128, N = 96, K = 64;
  uint64_t seed = 2000;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t cols_a = ta ? M : K;
      const int64_t rows_b = tb ? N : K, cols_b = tb ? K : N;
      GemmCase g{"gemm_strided_batched_" + trans_name(ta, tb), ta, tb, M, N, K, 0, 0, 0, 1.0f, 0.0f};
      g.batch = batch;
      // A interleaved like attention heads: matrix i is the i-th column block
      // of one wide matrix. B: separate blocks with a gap. C: padded rows.
      g.lda = batch * cols_a;
      g.stride_a = cols_a;
      g.ldb = cols_b + 3;
      g.stride_b = rows_b * g.ldb + 11;
      g.ldc = N + 2;
      g.stride_c = M * g.ldc;
      check_gemm(g, seed += 10);
      g.name += "_beta";
      g.alpha = 0.5f;
      g.beta = 1.0f;
      check_gemm(g, seed += 10);
    }
  // One A for every product (stride 0), as the convolutions' weight: under
  // bf16 it is packed once, not once per product.
  GemmCase shared{"gemm_strided_batched_shared_a", false, false, M, N, K, K, N, N, 1.0f, 0.0f};
  shared.batch = batch;
  shared.stride_a = 0;
  shared.stride_b = K * N;
  shared.stride_c = M * N;
  check_gemm(shared, seed += 10);
}

TEST(CudaLinear, ForwardAndBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  const int64_t N = 512, IC = 768, OC = 768;
  const Tensor in = random_host({N, IC}, 3001), w = random_host({OC, IC}, 3002);
  const Tensor bias = random_host({OC}, 3003), dout = random_host({N, OC}, 3004);
  const Tensor dw0 = random_host({OC, IC}, 3005), db0 = random_host({OC}, 3006);
  const Tensor din_in = dev(in), d_w = dev(w), d_bias = dev(bias), d_dout = dev(dout);

  Tensor out_ref = Tensor::empty({N, OC}), out_nb_ref = Tensor::empty({N, OC});
  cpu::linear_forward(out_ref.f32(), in.f32(), w.f32(), bias.f32(), N, IC, OC);
  cpu::linear_forward(out_nb_ref.f32(), in.f32(), w.f32(), nullptr, N, IC, OC);
  Tensor din_ref = Tensor::empty({N, IC}), dw_ref = Tensor::empty({OC, IC}), db_ref = Tensor::empty({OC});
  cpu::linear_backward(din_ref.f32(), dw_ref.f32(), db_ref.f32(), dout.f32(), in.f32(), w.f32(), N, IC, OC, false);
  Tensor dw_acc_ref = host_copy(dw0), db_acc_ref = host_copy(db0);
  cpu::linear_backward(nullptr, dw_acc_ref.f32(), db_acc_ref.f32(), dout.f32(), in.f32(), w.f32(), N, IC, OC, true);

  for (const auto backend : {cuda::LinearBackend::cublaslt, cuda::LinearBackend::cublas})
    for (const Precision& p : kPrecisions) {
      cuda::set_linear_backend(backend);
      cuda::set_gemm_precision(p.value);
      const std::string sfx = backend == cuda::LinearBackend::cublaslt ? ".lt" : "";
      const int64_t lt_missing = cuda::gemm_lt_stats().unsupported;
      const Tensor out = poisoned({N, OC}), out_nb = poisoned({N, OC});
      cuda::linear_forward(out.f32(), din_in.f32(), d_w.f32(), d_bias.f32(), N, IC, OC);
      cuda::linear_forward(out_nb.f32(), din_in.f32(), d_w.f32(), nullptr, N, IC, OC);
      report("linear_forward" + sfx, p.name, rel_error(out, out_ref), p.limit);
      report("linear_forward_nobias" + sfx, p.name, rel_error(out_nb, out_nb_ref), p.limit);
      // cuBLASLt has the bias epilogue for these types: the fused path ran.
      EXPECT_EQ(cuda::gemm_lt_stats().unsupported, lt_missing) << p.name;

      const Tensor din = poisoned({N, IC}), dw = poisoned({OC, IC}), db = poisoned({OC});
      cuda::linear_backward(din.f32(), dw.f32(), db.f32(), d_dout.f32(), din_in.f32(), d_w.f32(), N, IC, OC, false);
      report("linear_backward_din" + sfx, p.name, rel_error(din, din_ref), p.limit);
      report("linear_backward_dweight" + sfx, p.name, rel_error(dw, dw_ref), p.limit);
      report("linear_backward_dbias" + sfx, p.name, rel_error(db, db_ref), p.limit);

      // Accumulating, no input gradient.
      const Tensor dw_acc = dev(dw0), db_acc = dev(db0);
      cuda::linear_backward(nullptr, dw_acc.f32(), db_acc.f32(), d_dout.f32(), din_in.f32(), d_w.f32(), N, IC, OC,
                            true);
      report("linear_backward_acc_dweight" + sfx, p.name, rel_error(dw_acc, dw_acc_ref), p.limit);
      report("linear_backward_acc_dbias" + sfx, p.name, rel_error(db_acc, db_acc_ref), p.limit);
    }
  cuda::set_linear_backend(cuda::LinearBackend::cublaslt);
  std::printf("cuBLASLt: %lld plans, %lld calls, %lld without an algorithm (the cuBLAS path ran)\n",
              static_cast<long long>(cuda::gemm_lt_stats().plans), static_cast<long long>(cuda::gemm_lt_stats().calls),
              static_cast<long long>(cuda::gemm_lt_stats().unsupported));
}

// The forward's kept bf16 copies (LinearFusion::bf16) give the bits of
// the per-call conversions, forward and backward, overwriting and
// accumulating, on both backends; OC*IC is no multiple of 128, so the
// input's copy starts at the padded offset. A later micro-batch of another
// size that reuses the weight's copy (weight_kept) gives its own per-call
// bits too.
TEST(CudaLinear, KeptBf16CopiesGiveThePerCallBits) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  cuda::set_gemm_precision(cuda::GemmPrecision::bf16);
  // Rows of 16-byte multiples (IC, OC multiples of 8), as cuBLASLt's bf16
  // kernels want; OC*IC = 128,576 is no multiple of 128.
  const int64_t N = 250, IC = 392, OC = 328, N2 = 131;
  const Tensor in = dev(random_host({N, IC}, 3101)), w = dev(random_host({OC, IC}, 3102));
  const Tensor bias = dev(random_host({OC}, 3103)), dout = dev(random_host({N, OC}, 3104));
  const Tensor dw0 = random_host({OC, IC}, 3105), db0 = random_host({OC}, 3106);
  const auto same_bits = [](const Tensor& a, const Tensor& b, const std::string& what) {
    const Tensor ha = gpu_test::to_host(a), hb = gpu_test::to_host(b);
    EXPECT_EQ(std::memcmp(ha.raw(), hb.raw(), ha.nbytes()), 0) << what;
    std::printf("GPUCHECK kernel=%s dtype=bf16 relerr=%g limit=0 ok=%d\n", what.c_str(), rel_error(a, hb),
                std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0 ? 1 : 0);
  };
  for (const auto backend : {cuda::LinearBackend::cublaslt, cuda::LinearBackend::cublas}) {
    cuda::set_linear_backend(backend);
    const std::string sfx = backend == cuda::LinearBackend::cublaslt ? ".lt" : "";
    const Tensor kept = poisoned({cuda::linear_kept_bf16_elements(N, IC, OC)}, DType::bf16);
    const Tensor out = poisoned({N, OC}), out_kept = poisoned({N, OC});
    cuda::linear_forward(out.f32(), in.f32(), w.f32(), bias.f32(), N, IC, OC);
    cuda::linear_forward(out_kept.f32(), in.f32(), w.f32(), bias.f32(), N, IC, OC, {kept.raw(), nullptr});
    same_bits(out_kept, out, "linear_forward_kept" + sfx);
    for (const bool accumulate : {false, true}) {
      const std::string acc = accumulate ? "_acc" : "";
      const Tensor din = poisoned({N, IC}), din_kept = poisoned({N, IC});
      const Tensor dw = dev(dw0), db = dev(db0), dw_kept = dev(dw0), db_kept = dev(db0);
      cuda::linear_backward(din.f32(), dw.f32(), db.f32(), dout.f32(), in.f32(), w.f32(), N, IC, OC, accumulate);
      cuda::linear_backward(din_kept.f32(), dw_kept.f32(), db_kept.f32(), dout.f32(), in.f32(), w.f32(), N, IC, OC,
                            accumulate, {kept.raw(), nullptr});
      same_bits(din_kept, din, "linear_backward_kept_din" + acc + sfx);
      same_bits(dw_kept, dw, "linear_backward_kept_dweight" + acc + sfx);
      same_bits(db_kept, db, "linear_backward_kept_dbias" + acc + sfx);
    }
    // The next micro-batch: N2 rows of another input, the weight's copy as
    // the first forward left it.
    const Tensor in2 = dev(random_host({N2, IC}, 3107));
    const Tensor out2 = poisoned({N2, OC}), out2_kept = poisoned({N2, OC});
    cuda::linear_forward(out2.f32(), in2.f32(), w.f32(), bias.f32(), N2, IC, OC);
    cuda::LinearFusion reuse{kept.raw(), nullptr};
    reuse.weight_kept = true;
    cuda::linear_forward(out2_kept.f32(), in2.f32(), w.f32(), bias.f32(), N2, IC, OC, reuse);
    same_bits(out2_kept, out2, "linear_forward_weight_kept" + sfx);
    const Tensor din2 = poisoned({N2, IC}), din2_kept = poisoned({N2, IC});
    const Tensor dw2 = dev(dw0), db2 = dev(db0), dw2_kept = dev(dw0), db2_kept = dev(db0);
    const Tensor dout2 = dout.view(0, {N2, OC});
    cuda::linear_backward(din2.f32(), dw2.f32(), db2.f32(), dout2.f32(), in2.f32(), w.f32(), N2, IC, OC, true);
    cuda::linear_backward(din2_kept.f32(), dw2_kept.f32(), db2_kept.f32(), dout2.f32(), in2.f32(), w.f32(), N2, IC, OC,
                          true, {kept.raw(), nullptr});
    same_bits(din2_kept, din2, "linear_backward_weight_kept_din" + sfx);
    same_bits(dw2_kept, dw2, "linear_backward_weight_kept_dweight" + sfx);
  }
  cuda::set_linear_backend(cuda::LinearBackend::cublaslt);
}

// The GELU folded into the linear layers (LinearFusion::gelu_pre): at bf16
// the forward's GELU_AUX_BIAS epilogue and the next layer's DGELU epilogue,
// at f32 and tf32 (and on the plain cuBLAS backend) the GEMM and the GELU
// kernel, against the CPU's linear + gelu, with and without the kept bf16
// copies.
TEST(CudaLinear, GeluEpiloguesMatchCpu) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  const int64_t N = 256, C = 192, H = 4 * C;  // fc: C -> H, then GELU, then fc_proj: H -> C
  const Tensor in = random_host({N, C}, 3201), w_fc = random_host({H, C}, 3202), b_fc = random_host({H}, 3203);
  const Tensor w_proj = random_host({C, H}, 3204), dout = random_host({N, C}, 3205);
  Tensor pre_ref = Tensor::empty({N, H}), gelu_ref = Tensor::empty({N, H});
  cpu::linear_forward(pre_ref.f32(), in.f32(), w_fc.f32(), b_fc.f32(), N, C, H);
  cpu::gelu_forward(gelu_ref.f32(), pre_ref.f32(), N * H);
  Tensor dgelu_ref = Tensor::empty({N, H}), dw_ref = Tensor::empty({C, H});
  cpu::linear_backward(dgelu_ref.f32(), dw_ref.f32(), nullptr, dout.f32(), gelu_ref.f32(), w_proj.f32(), N, H, C,
                       false);
  cpu::gelu_backward(dgelu_ref.f32(), dgelu_ref.f32(), pre_ref.f32(), N * H);
  const Tensor d_in = dev(in), d_wfc = dev(w_fc), d_bfc = dev(b_fc), d_wproj = dev(w_proj), d_dout = dev(dout);
  for (const auto backend : {cuda::LinearBackend::cublaslt, cuda::LinearBackend::cublas})
    for (const Precision& p : kPrecisions)
      for (const bool keep : {false, true}) {
        if (keep && p.value != cuda::GemmPrecision::bf16) continue;
        cuda::set_linear_backend(backend);
        cuda::set_gemm_precision(p.value);
        const std::string sfx =
            std::string(backend == cuda::LinearBackend::cublaslt ? ".lt" : "") + (keep ? ".kept" : "");
        const Tensor kept_fc = poisoned({cuda::linear_kept_bf16_elements(N, C, H)}, DType::bf16);
        const Tensor kept_proj = poisoned({cuda::linear_kept_bf16_elements(N, H, C)}, DType::bf16);
        const Tensor pre = poisoned({N, H}), gelu = poisoned({N, H}), dgelu = poisoned({N, H}), dw = poisoned({C, H});
        const Tensor proj_out = poisoned({N, C});
        const int64_t lt_missing = cuda::gemm_lt_stats().unsupported;
        cuda::linear_forward(gelu.f32(), d_in.f32(), d_wfc.f32(), d_bfc.f32(), N, C, H,
                             {keep ? kept_fc.raw() : nullptr, pre.f32()});
        cuda::linear_forward(proj_out.f32(), gelu.f32(), d_wproj.f32(), nullptr, N, H, C,
                             {keep ? kept_proj.raw() : nullptr, nullptr});
        cuda::linear_backward(dgelu.f32(), dw.f32(), nullptr, d_dout.f32(), gelu.f32(), d_wproj.f32(), N, H, C, false,
                              {keep ? kept_proj.raw() : nullptr, pre.f32()});
        report("linear_gelu_forward_pre" + sfx, p.name, rel_error(pre, pre_ref), p.limit);
        report("linear_gelu_forward" + sfx, p.name, rel_error(gelu, gelu_ref), p.limit);
        report("linear_backward_dgelu" + sfx, p.name, rel_error(dgelu, dgelu_ref), p.limit);
        report("linear_backward_dgelu_dweight" + sfx, p.name, rel_error(dw, dw_ref), p.limit);
        if (backend == cuda::LinearBackend::cublaslt)
          std::printf("GELU epilogues at %s%s: %s\n", p.name, keep ? " (kept copies)" : "",
                      cuda::gemm_lt_stats().unsupported == lt_missing ? "cuBLASLt" : "fell back to the GELU kernels");
      }
  cuda::set_linear_backend(cuda::LinearBackend::cublaslt);
}

TEST(CudaConv2d, ForwardAndBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  using cpu::Conv2dShape;
  struct Case {
    const char* name;
    Conv2dShape s;
    int64_t samples_per_pass = 0;  // 0: all at once (the default limit)
  };
  const Case cases[] = {
      {"conv2d_k5s1p2", {8, 3, 28, 28, 16, 5, 1, 2}},
      {"conv2d_k5s2p2", {8, 3, 28, 28, 16, 5, 2, 2}},
      {"conv2d_k3s2p1_nonsquare", {4, 16, 15, 12, 32, 3, 2, 1}},
      {"conv2d_k1", {4, 16, 14, 14, 32, 1, 1, 0}},                // col is the image itself
      {"conv2d_k5s1p2_passes3", {8, 3, 28, 28, 16, 5, 1, 2}, 3},  // passes of 3, 3 and 2 samples
      {"conv2d_k1_passes1", {4, 16, 14, 14, 32, 1, 1, 0}, 1},
  };
  uint64_t seed = 4000;
  for (const Case& c : cases) {
    const Conv2dShape& s = c.s;
    const int64_t default_limit = cuda::set_conv_cols_limit(int64_t(128) << 20);
    const int64_t in_n = s.B * s.C * s.H * s.W, out_n = s.B * s.OC * s.OH() * s.OW();
    const int64_t w_n = s.OC * s.C * s.K * s.K;
    const Tensor in = random_host({in_n}, seed += 10), w = random_host({w_n}, seed += 1);
    const Tensor bias = random_host({s.OC}, seed += 1), dout = random_host({out_n}, seed += 1);
    const Tensor dw0 = random_host({w_n}, seed += 1), db0 = random_host({s.OC}, seed += 1);
    std::vector<float> col(size_t(s.col_floats()));

    Tensor out_ref = Tensor::empty({out_n});
    cpu::conv2d_forward(out_ref.f32(), in.f32(), w.f32(), bias.f32(), col.data(), s);
    Tensor din_ref = Tensor::empty({in_n}), dw_ref = Tensor::empty({w_n}), db_ref = Tensor::empty({s.OC});
    cpu::conv2d_backward(din_ref.f32(), dw_ref.f32(), db_ref.f32(), dout.f32(), in.f32(), w.f32(), col.data(), s,
                         false);
    Tensor dw_acc_ref = host_copy(dw0), db_acc_ref = host_copy(db0);
    cpu::conv2d_backward(nullptr, dw_acc_ref.f32(), db_acc_ref.f32(), dout.f32(), in.f32(), w.f32(), col.data(), s,
                         true);

    const Tensor d_in = dev(in), d_w = dev(w), d_bias = dev(bias), d_dout = dev(dout);
    const std::string name = c.name;
    for (const Precision& p : kPrecisions) {
      cuda::set_gemm_precision(p.value);
      if (c.samples_per_pass > 0) {
        // A pass holds each sample's cols and weight-gradient partial, and
        // under bf16 their bf16 copies too (conv2d.cu, samples_per_pass).
        const int64_t floats = s.col_floats() + s.OC * s.C * s.K * s.K;
        cuda::set_conv_cols_limit(c.samples_per_pass * floats * (p.value == cuda::GemmPrecision::bf16 ? 6 : 4));
      }
      const Tensor d_col = poisoned({std::max<int64_t>(1, s.col_floats())});
      const Tensor out = poisoned({out_n});
      cuda::conv2d_forward(out.f32(), d_in.f32(), d_w.f32(), d_bias.f32(), d_col.f32(), s);
      report(name + "_forward", p.name, rel_error(out, out_ref), p.limit);

      const Tensor din = poisoned({in_n}), dw = poisoned({w_n}), db = poisoned({s.OC});
      cuda::conv2d_backward(din.f32(), dw.f32(), db.f32(), d_dout.f32(), d_in.f32(), d_w.f32(), d_col.f32(), s, false);
      report(name + "_backward_din", p.name, rel_error(din, din_ref), p.limit);
      report(name + "_backward_dweight", p.name, rel_error(dw, dw_ref), p.limit);
      report(name + "_backward_dbias", p.name, rel_error(db, db_ref), p.limit);

      const Tensor dw_acc = dev(dw0), db_acc = dev(db0);
      cuda::conv2d_backward(nullptr, dw_acc.f32(), db_acc.f32(), d_dout.f32(), d_in.f32(), d_w.f32(), d_col.f32(), s,
                            true);
      report(name + "_backward_acc_dweight", p.name, rel_error(dw_acc, dw_acc_ref), p.limit);
      report(name + "_backward_acc_dbias", p.name, rel_error(db_acc, db_acc_ref), p.limit);
    }
    cuda::set_conv_cols_limit(default_limit);
  }
}

TEST(CudaConv2d, Col2imIsTheGatherOfCpuCol2im) {
  ST_REQUIRE_GPU();
  const cpu::Conv2dShape s{1, 3, 13, 11, 4, 3, 2, 1};
  const Tensor col = random_host({s.col_floats()}, 4500);
  const Tensor image = random_host({s.C * s.H * s.W}, 4501);
  Tensor img_ref = Tensor::empty({s.C * s.H * s.W}), col_ref = Tensor::empty({s.col_floats()});
  cpu::col2im(img_ref.f32(), col.f32(), s);
  cpu::im2col(col_ref.f32(), image.f32(), s);
  const Tensor d_col = dev(col), d_image = dev(image);
  const Tensor img = poisoned({s.C * s.H * s.W}), col_out = poisoned({s.col_floats()});
  cuda::col2im(img.f32(), d_col.f32(), s);
  cuda::im2col(col_out.f32(), d_image.f32(), s);
  report("col2im", "f32", rel_error(img, img_ref), gpu_test::kLimitF32);
  report("im2col", "f32", rel_error(col_out, col_ref), gpu_test::kLimitF32);
}

// Three shapes: as many heads as samples, fewer heads (the GEMMs batch the
// samples, one launch per head) and more heads (batched heads, one launch
// per sample).
TEST(CudaAttention, ForwardAndBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  RestoreF32 restore;
  struct Dims {
    int64_t B, T, C, NH;
    const char* suffix;
  };
  for (const Dims& d : {Dims{4, 64, 128, 4, ""}, Dims{6, 48, 64, 2, "_b6h2"}, Dims{2, 40, 128, 8, "_b2h8"}}) {
    const int64_t B = d.B, T = d.T, C = d.C, NH = d.NH;
    const Tensor qkv = random_host({B, T, 3 * C}, 5001), dout = random_host({B, T, C}, 5002);
    Tensor out_ref = Tensor::empty({B, T, C}), att_ref = Tensor::empty({B, NH, T, T});
    cpu::attention_forward(out_ref.f32(), att_ref.f32(), qkv.f32(), B, T, C, NH);
    Tensor dqkv_ref = Tensor::empty({B, T, 3 * C});
    std::vector<float> scratch(size_t(T * T));
    cpu::attention_backward(dqkv_ref.f32(), scratch.data(), dout.f32(), qkv.f32(), att_ref.f32(), B, T, C, NH);

    const Tensor d_qkv = dev(qkv), d_dout = dev(dout);
    const std::string s = d.suffix;
    for (const Precision& p : kPrecisions) {
      cuda::set_gemm_precision(p.value);
      const Tensor out = poisoned({B, T, C}), att = poisoned({B, NH, T, T});
      cuda::attention_forward(out.f32(), att.f32(), d_qkv.f32(), B, T, C, NH);
      report("attention_forward" + s, p.name, rel_error(out, out_ref), p.limit);
      report("attention_forward_att" + s, p.name, rel_error(att, att_ref), p.limit);
      // Backward from the GPU's own probabilities, as training would run it.
      const Tensor dqkv = poisoned({B, T, 3 * C});
      cuda::attention_backward(dqkv.f32(), d_dout.f32(), d_qkv.f32(), att.f32(), B, T, C, NH);
      report("attention_backward" + s, p.name, rel_error(dqkv, dqkv_ref), p.limit);
    }
  }
}

}  // namespace
}  // namespace shardtrain

#else  // no CUDA backend in this build

TEST(CudaGemm, NeedsTheCudaBackend) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }

#endif
