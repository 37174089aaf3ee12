#include "kernels/cpu/cpu_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>

namespace shardtrain::cpu {
namespace {

std::atomic<CpuBackend> g_backend{CpuBackend::automatic};
thread_local bool t_im2col = false;  // an Im2colProducts is alive on this thread

dnnl_cpu_isa_t effective_isa() { return dnnl_get_effective_cpu_isa(); }

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

// omp_set_num_threads from the OpenMP runtime libdnnl loads (libgomp): looked
// up at run time, so that shardtrain itself is not built with -fopenmp.
using SetThreadsFn = void (*)(int);
SetThreadsFn omp_set_threads() {
  static const SetThreadsFn fn = reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return fn;
}

}  // namespace

void set_cpu_backend(CpuBackend backend) { g_backend = backend; }
CpuBackend cpu_backend() { return g_backend; }

bool onednn_convolutions() { return g_backend != CpuBackend::openblas; }

bool onednn_native_bf16() {
  const auto bf16 = unsigned(dnnl_cpu_isa_avx512_core_bf16);
  return (unsigned(effective_isa()) & bf16) == bf16;
}

bool onednn_avx512() {
  const auto avx512 = unsigned(dnnl_cpu_isa_avx512_core);
  return (unsigned(effective_isa()) & avx512) == avx512;
}

Im2colProducts::Im2colProducts() : before_(t_im2col) { t_im2col = true; }
Im2colProducts::~Im2colProducts() { t_im2col = before_; }

bool onednn_products(GemmPrecision precision) {
  switch (g_backend.load()) {
    case CpuBackend::openblas: return false;
    case CpuBackend::onednn: return precision == GemmPrecision::f32 || onednn_native_bf16();
    case CpuBackend::automatic:
      return precision == GemmPrecision::bf16 ? onednn_native_bf16() : onednn_avx512() && !t_im2col;
  }
  return false;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{} ({})", v->major, v->minor, v->patch, isa_name(effective_isa()));
}

std::string cpu_backend_summary() {
  std::string dnnl = "oneDNN " + onednn_version();
  auto products = [&](GemmPrecision p) -> std::string {
    if (onednn_products(p)) return dnnl;
    if (p == GemmPrecision::f32) return "OpenBLAS";
    return native_bf16_gemm() ? "OpenBLAS sbgemm" : "OpenBLAS (operands rounded to bf16)";
  };
  return fmt::format("convolutions {}, f32 products {}, bf16 products {}",
                     onednn_convolutions() ? dnnl : std::string("im2col + OpenBLAS"), products(GemmPrecision::f32),
                     products(GemmPrecision::bf16));
}

void match_onednn_threads() {
  thread_local int applied = 0;
  const int threads = blas_threads();
  if (applied == threads) return;
  if (SetThreadsFn fn = omp_set_threads()) fn(threads);
  applied = threads;
}

const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

}  // namespace shardtrain::cpu
