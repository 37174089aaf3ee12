#include "kernels/gemm_precision.h"

#include "kernels/cpu/gemm.h"

#ifdef SHARDTRAIN_HAVE_CUDA
#include "kernels/cuda/context.h"
#endif

namespace shardtrain {

void Bf16Gemms::enter() {
  if (active_) return;
  active_ = true;
  saved_cpu_ = int(cpu::gemm_precision());
  cpu::set_gemm_precision(cpu::GemmPrecision::bf16);
#ifdef SHARDTRAIN_HAVE_CUDA
  saved_gpu_ = int(cuda::gemm_precision());
  cuda::set_gemm_precision(cuda::GemmPrecision::bf16);
#endif
}

void Bf16Gemms::leave() {
  if (!active_) return;
  active_ = false;
  cpu::set_gemm_precision(cpu::GemmPrecision(saved_cpu_));
#ifdef SHARDTRAIN_HAVE_CUDA
  cuda::set_gemm_precision(cuda::GemmPrecision(saved_gpu_));
#endif
}

}  // namespace shardtrain
