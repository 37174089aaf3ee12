#include "runtime/train/step_graphs.h"

#include "kernels/devices.h"
#include "runtime/core/allocator.h"

#include <cstdio>

namespace shardtrain::train {
namespace {

// More resets than this and the memory moves every few steps: graphs would
// be recaptured more often than replayed.
constexpr int64_t kMaxResets = 8;

class GpuGraphBackend final : public GraphBackend {
 public:
  explicit GpuGraphBackend(Device device) : device_(device) {}
  std::shared_ptr<void> capture(const std::function<void()>& work, std::string* why) override {
    return capture_gpu_graph(work, why).exec;
  }
  void launch(const std::shared_ptr<void>& graph) override { launch_gpu_graph(GpuGraph{graph}); }
  std::pair<int64_t, int64_t> memory_state() override {
    return {memory_stats(device_).allocations, int64_t(gpu_workspace_bytes())};
  }

 private:
  Device device_;
};

}  // namespace

std::unique_ptr<GraphBackend> gpu_graph_backend(Device device) { return std::make_unique<GpuGraphBackend>(device); }

void StepGraphs::disable(const std::string& why) {
  enabled_ = false;
  off_reason_ = why;
  graphs_.clear();
  std::fprintf(stderr, "shardtrain: warning: CUDA graphs off for this run (runtime.cuda_graphs): %s\n", why.c_str());
}

bool StepGraphs::run(const MicroBatchKey& key, const std::function<void()>& body) {
  if (!enabled_) {
    body();
    return false;
  }
  // Memory that moved between calls (an evaluation, a checkpoint load):
  // every graph may point at freed buffers, and every key warms up again.
  const std::pair<int64_t, int64_t> state = backend_->memory_state();
  if (state != memory_) {
    if (memory_.first >= 0 && ++resets_ > kMaxResets) {
      disable("device memory keeps moving between steps (" + std::to_string(resets_) + " resets)");
      body();
      return false;
    }
    graphs_.clear();
    warmed_.clear();
    memory_ = state;
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (warmed_.count(key) == 0) {  // the warm-up: allocations and plans happen here
      body();
      warmed_.insert(key);
      // A warm-up that allocated may have moved buffers other graphs use.
      if (backend_->memory_state() != memory_) {
        graphs_.clear();
        memory_ = backend_->memory_state();
      }
      return false;
    }
    std::string why;
    std::shared_ptr<void> graph = backend_->capture(body, &why);
    if (graph == nullptr) {
      disable("capturing a micro-batch failed: " + why);
      body();  // nothing of the capture ran
      return false;
    }
    ++captures_;
    it = graphs_.emplace(key, std::move(graph)).first;
  }
  backend_->launch(it->second);
  ++launches_;
  return true;
}

}  // namespace shardtrain::train
