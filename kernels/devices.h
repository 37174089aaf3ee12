// Which accelerators this build and this process can use. Answers "none" in a
// build without the CUDA backend, so callers need no #ifdefs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardtrain {

struct AcceleratorInfo {
  int index;
  std::string name;
  std::string compute_capability;  // "9.0"
  size_t total_memory_bytes;
};

bool cuda_backend_built();
// Visible CUDA devices; empty (with the reason in *why_none) when there are none.
std::vector<AcceleratorInfo> cuda_devices(std::string* why_none = nullptr);

// Brings up CUDA device `index` for this process: its streams, cuBLAS, the
// caching allocator (Device::cuda(index) tensors) and pinned host memory. An
// Error in a build without the CUDA backend or when the device is missing.
void use_cuda_device(int index);
// GEMM precision for f32 tensors on the GPU: "f32", "tf32" or "bf16"
// (bf16 operands, f32 accumulation). An Error for other names.
void set_gpu_gemm_precision(const std::string& name);
// "cublaslt" | "cublas" (kernels/cuda/context.h LinearBackend).
void set_gpu_linear_backend(const std::string& name);
// "cudnn" | "tiled" | "materialized" (kernels/cuda/context.h AttentionBackend).
void set_gpu_attention_backend(const std::string& name);
// A CUDA graph of the compute stream's work (kernels/cuda/graph.h); empty
// where none was captured.
struct GpuGraph {
  std::shared_ptr<void> exec;
  explicit operator bool() const { return exec != nullptr; }
};
// Captures what `work` issues to the compute stream (nothing runs). An
// empty graph, with the reason in *why, where work threw or CUDA refused;
// always empty in a build without the CUDA backend.
GpuGraph capture_gpu_graph(const std::function<void()>& work, std::string* why);
void launch_gpu_graph(const GpuGraph& graph);

// Waits for the GPU's compute stream (timing, tests), then raises an error a
// kernel found (kernels/cuda/context.h); nothing without a GPU.
void synchronize_gpu();
// Bytes the caching allocator holds from the driver (reserved, >= in use).
size_t gpu_reserved_bytes();
// Bytes of the kernels' own workspaces (conv passes, attention's score
// gradients, bf16 operand copies), held outside the tensor accounting.
size_t gpu_workspace_bytes();

}  // namespace shardtrain
