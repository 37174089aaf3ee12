// Which library computes the CPU's convolutions and matrix products:
//   openblas   every product through OpenBLAS; convolutions as im2col + GEMM
//   onednn     convolutions through oneDNN's direct kernels (its blocked
//              layouts), matrix products through oneDNN's matmul (bf16 ones
//              where the CPU has its bf16 kernels; elsewhere they stay on
//              OpenBLAS, as oneDNN has none to run them)
//   automatic  convolutions through oneDNN; bf16 matrix products through
//              oneDNN where the CPU has its bf16 kernels (AVX512-BF16 or
//              AMX), f32 ones where it has its AVX-512 kernels; OpenBLAS
//              otherwise: on AVX2 cores oneDNN's f32 matmul is no faster
//              than OpenBLAS's sgemm and slower at some strides, on an
//              AVX-512 core it was faster at every model shape but
//              im2col's per-sample products, which stay on OpenBLAS
//              (docs/BENCHMARKS.md, "oneDNN for the CPU's convolutions and
//              products", "f32 products on oneDNN on AVX-512 cores").
// A convolution pass oneDNN has no direct kernel for (it would pick its own
// im2col + GEMM or a reference kernel) stays on im2col, whatever the setting. The route depends only on
// the setting, the shapes and the CPU, never on timings: a seed's results are
// the same bits in every run on one machine.
#pragma once

#include "kernels/cpu/gemm.h"
#include "runtime/core/enum_names.h"

#include <array>
#include <span>
#include <string>

namespace dnnl {
class engine;
class stream;
}  // namespace dnnl

namespace shardtrain::cpu {

enum class CpuBackend { automatic, onednn, openblas };
inline std::span<const EnumName<CpuBackend>> enum_names(CpuBackend) {
  static constexpr std::array<EnumName<CpuBackend>, 3> n = {
      {{CpuBackend::automatic, "auto"}, {CpuBackend::onednn, "onednn"}, {CpuBackend::openblas, "openblas"}}};
  return n;
}

void set_cpu_backend(CpuBackend backend);
CpuBackend cpu_backend();

// Whether convolutions go to oneDNN (then pass by pass, see onednn_conv.h).
bool onednn_convolutions();
// Whether a matrix product of this operand precision goes to oneDNN.
bool onednn_products(GemmPrecision precision);
// Whether oneDNN runs bf16 products on bf16 hardware here.
bool onednn_native_bf16();
// Whether oneDNN runs its AVX-512 kernels here.
bool onednn_avx512();
// While one is alive on a thread, that thread's f32 products under
// `automatic` stay on OpenBLAS: im2col's per-sample GEMMs (a convolution
// pass oneDNN has no direct kernel for), where OpenBLAS was the faster.
class Im2colProducts {
 public:
  Im2colProducts();
  ~Im2colProducts();
  Im2colProducts(const Im2colProducts&) = delete;
  Im2colProducts& operator=(const Im2colProducts&) = delete;

 private:
  bool before_;
};

// oneDNN's version and the instruction set its kernels use ("2.6.3 (avx2)").
std::string onednn_version();
// One line for the run log and `info`: what computes convolutions and
// products in this process, e.g. "convolutions oneDNN 2.6.3 (avx2), f32
// products OpenBLAS, bf16 products OpenBLAS (operands rounded)".
std::string cpu_backend_summary();

// oneDNN's primitives (built with OpenMP) run with as many threads as
// OpenBLAS's products (set_blas_threads) on the calling thread: one rank per
// core. Called before each oneDNN call; cheap after the first.
void match_onednn_threads();

// The CPU engine every oneDNN primitive here is built for, and this thread's
// stream on it (primitives run in order on the calling thread).
const dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();

}  // namespace shardtrain::cpu
