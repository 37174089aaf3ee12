#include "kernels/cuda/graph.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <exception>

namespace shardtrain::cuda {

struct CapturedGraph {
  cudaGraphExec_t exec = nullptr;
  CapturedGraph() = default;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

std::shared_ptr<CapturedGraph> capture_graph(const std::function<void()>& work, std::string* why) {
  cudaStream_t stream = compute_stream();
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    *why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return nullptr;
  }
  std::string failure;
  try {
    work();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(stream, &graph);
  if (failure.empty() && err != cudaSuccess) failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(err);
  auto out = std::make_shared<CapturedGraph>();
  if (failure.empty()) {
    err = cudaGraphInstantiate(&out->exec, graph, 0);
    if (err != cudaSuccess) failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(err);
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (failure.empty()) return out;
  cudaGetLastError();  // a refused capture leaves its error behind; nothing ran
  *why = failure;
  return nullptr;
}

void launch_graph(const CapturedGraph& graph) { ST_CUDA_CHECK(cudaGraphLaunch(graph.exec, compute_stream())); }

}  // namespace shardtrain::cuda
