#include "kernels/devices.h"

#include "runtime/core/error.h"

#ifdef SHARDTRAIN_HAVE_CUDA
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/graph.h"
#endif

namespace shardtrain {

bool cuda_backend_built() {
#ifdef SHARDTRAIN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<AcceleratorInfo> cuda_devices(std::string* why_none) {
  std::vector<AcceleratorInfo> out;
#ifdef SHARDTRAIN_HAVE_CUDA
  for (const auto& d : cuda::visible_devices(why_none))
    out.push_back({d.index, d.name, std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor),
                   d.total_memory_bytes});
#else
  if (why_none) *why_none = "this build has no CUDA backend (configure found no nvcc)";
#endif
  return out;
}

void use_cuda_device(int index) {
#ifdef SHARDTRAIN_HAVE_CUDA
  cuda::init_device(index);
#else
  throw Error(
      fmt::format("CUDA device {} asked for, but this build has no CUDA backend "
                  "(configure found no nvcc)",
                  index));
#endif
}

void set_gpu_gemm_precision(const std::string& name) {
#ifdef SHARDTRAIN_HAVE_CUDA
  cuda::set_gemm_precision(cuda::parse_gemm_precision(name));
#else
  ST_CHECK(name == "f32" || name == "tf32" || name == "bf16", "GEMM precision \"{}\": expected f32, tf32 or bf16",
           name);
#endif
}

void set_gpu_linear_backend(const std::string& name) {
#ifdef SHARDTRAIN_HAVE_CUDA
  cuda::set_linear_backend(cuda::parse_linear_backend(name));
#else
  ST_CHECK(name == "cublaslt" || name == "cublas", "GPU linear backend \"{}\": expected cublaslt or cublas", name);
#endif
}

void set_gpu_attention_backend(const std::string& name) {
#ifdef SHARDTRAIN_HAVE_CUDA
  cuda::set_attention_backend(cuda::parse_attention_backend(name));
#else
  ST_CHECK(name == "cudnn" || name == "materialized" || name == "tiled",
           "GPU attention backend \"{}\": expected cudnn, tiled or materialized", name);
#endif
}

GpuGraph capture_gpu_graph(const std::function<void()>& work, std::string* why) {
#ifdef SHARDTRAIN_HAVE_CUDA
  return {cuda::capture_graph(work, why)};
#else
  (void)work;
  *why = "this build has no CUDA backend";
  return {};
#endif
}

void launch_gpu_graph(const GpuGraph& graph) {
  ST_CHECK(graph, "launch_gpu_graph: no graph was captured");
#ifdef SHARDTRAIN_HAVE_CUDA
  cuda::launch_graph(*std::static_pointer_cast<cuda::CapturedGraph>(graph.exec));
#endif
}

void synchronize_gpu() {
#ifdef SHARDTRAIN_HAVE_CUDA
  if (cuda::device_initialized()) cuda::sync_compute();
#endif
}

size_t gpu_reserved_bytes() {
#ifdef SHARDTRAIN_HAVE_CUDA
  if (cuda::device_initialized()) return cuda::reserved_bytes();
#endif
  return 0;
}

size_t gpu_workspace_bytes() {
#ifdef SHARDTRAIN_HAVE_CUDA
  if (cuda::device_initialized()) return cuda::scratch_bytes();
#endif
  return 0;
}

}  // namespace shardtrain
