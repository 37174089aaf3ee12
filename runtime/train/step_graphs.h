// CUDA graphs of a training step's micro-batches (runtime.cuda_graphs): a
// micro-batch's forward, fused loss and backward, hundreds of kernel
// launches, and with the last micro-batch the optimizer's update where the
// strategy allows it (parallel::Strategy::update_capturable), captured once
// and then replayed with one launch.
//
// A graph bakes in every device address its kernels use, so one is made
// only when nothing moves: the first run of a key is eager (the warm-up that
// allocates the activations and workspaces, builds cuBLASLt plans and cuDNN
// graphs), the second is captured, later ones replay. The key holds what
// differs between micro-batches (index, count, the input slot's buffers);
// any tensor allocation or workspace growth since the graphs were made (an
// evaluation with a larger batch, a checkpoint load) drops them all and
// warms up again. A capture that fails runs the micro-batch eagerly and
// turns graphs off for the run, with the reason in a warning; so does a
// memory state that keeps changing.
#pragma once

#include "runtime/core/device.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

namespace shardtrain::train {

// How graphs are captured and launched: the GPU's (kernels/devices.h), or
// a test's stand-in.
class GraphBackend {
 public:
  virtual ~GraphBackend() = default;
  // Nothing of `work` runs on the device; null with *why on failure.
  virtual std::shared_ptr<void> capture(const std::function<void()>& work, std::string* why) = 0;
  virtual void launch(const std::shared_ptr<void>& graph) = 0;
  // Changes whenever device buffers may have moved: tensor allocations and
  // the kernels' workspace bytes.
  virtual std::pair<int64_t, int64_t> memory_state() = 0;
};
std::unique_ptr<GraphBackend> gpu_graph_backend(Device device);

struct MicroBatchKey {
  int64_t index, count, local_batch, global_batch;
  const void* x;
  const void* y;
  bool update;  // the optimizer's update follows the backward in the graph
  auto tie() const { return std::tie(index, count, local_batch, global_batch, x, y, update); }
  bool operator<(const MicroBatchKey& o) const { return tie() < o.tie(); }
};

class StepGraphs {
 public:
  explicit StepGraphs(std::unique_ptr<GraphBackend> backend) : backend_(std::move(backend)) {}

  // Runs `body` for this micro-batch: eagerly, or captured and launched, or
  // launched. True when it ran as a graph.
  bool run(const MicroBatchKey& key, const std::function<void()>& body);

  bool enabled() const { return enabled_; }
  // For the run's summary: graphs made, micro-batches replayed, and why
  // graphs were turned off ("" while on).
  int64_t captures() const { return captures_; }
  int64_t launches() const { return launches_; }
  const std::string& off_reason() const { return off_reason_; }

 private:
  void disable(const std::string& why);

  std::unique_ptr<GraphBackend> backend_;
  bool enabled_ = true;
  std::set<MicroBatchKey> warmed_;
  std::map<MicroBatchKey, std::shared_ptr<void>> graphs_;
  std::pair<int64_t, int64_t> memory_{-1, -1};  // the state the graphs and warm-ups belong to
  int64_t captures_ = 0, launches_ = 0, resets_ = 0;
  std::string off_reason_;
};

}  // namespace shardtrain::train
