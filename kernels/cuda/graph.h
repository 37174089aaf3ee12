// CUDA graphs of work issued to the compute stream: captured once (nothing
// runs while capturing), replayed with one launch. Training replays a
// micro-batch's forward, loss and backward this way (runtime/train/
// step_graphs.h): hundreds of kernel launches become one.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace shardtrain::cuda {

struct CapturedGraph;

// Runs `work` with the compute stream capturing (thread-local mode: other
// threads' CUDA calls are not affected) and instantiates what it issued.
// Null, with the reason in *why, where work threw (a call not allowed while
// capturing, for one) or CUDA refused the capture; the capture is then ended
// and discarded, and nothing of `work` has run on the device.
std::shared_ptr<CapturedGraph> capture_graph(const std::function<void()>& work, std::string* why);

// Replays the graph on the compute stream.
void launch_graph(const CapturedGraph& graph);

}  // namespace shardtrain::cuda
