#include "kernels/cuda/op_timer.h"

#include "kernels/cuda/context.h"

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

namespace shardtrain::cuda {
namespace {

// Event pairs are kept and reused: a step records a few hundred ops, the
// same number every step, so after the first step no event is created.
class EventOpTimer final : public DeviceOpTimer {
 public:
  int64_t begin(OpClass c) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (used_ == pairs_.size()) {
      Pair p;
      ST_CUDA_CHECK(cudaEventCreate(&p.start));
      ST_CUDA_CHECK(cudaEventCreate(&p.end));
      pairs_.push_back(p);
    }
    Pair& p = pairs_[used_];
    p.cls = c;
    ST_CUDA_CHECK(cudaEventRecord(p.start, compute_stream()));
    return int64_t(used_++);
  }

  void end(int64_t token) override {
    std::lock_guard<std::mutex> lock(mu_);
    ST_CUDA_CHECK(cudaEventRecord(pairs_[size_t(token)].end, compute_stream()));
  }

  void collect(OpTimes& into) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < used_; ++i) {
      const Pair& p = pairs_[i];
      ST_CUDA_CHECK(cudaEventSynchronize(p.end));
      float ms = 0;
      ST_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.end));
      into.seconds[size_t(p.cls)] += double(ms) * 1e-3;
      into.calls[size_t(p.cls)] += 1;
    }
    used_ = 0;
  }

 private:
  struct Pair {
    cudaEvent_t start = nullptr, end = nullptr;
    OpClass cls = OpClass::linear;
  };
  std::mutex mu_;
  std::vector<Pair> pairs_;
  size_t used_ = 0;
};

}  // namespace

DeviceOpTimer& device_op_timer() {
  static auto* t = new EventOpTimer;  // outlives every op (never destroyed)
  return *t;
}

}  // namespace shardtrain::cuda
