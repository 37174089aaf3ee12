#include "runtime/core/op_timing.h"

#include <chrono>

namespace shardtrain {
namespace {

std::atomic<DeviceOpTimer*> g_device_timer{nullptr};
// Host-clock totals; several threads run ops (the training thread, DDP's
// communication threads converting buckets).
std::array<std::atomic<int64_t>, kOpClasses> g_host_ns{};
std::array<std::atomic<int64_t>, kOpClasses> g_host_calls{};
thread_local int t_depth = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* op_class_name(OpClass c) {
  static constexpr std::array<const char*, kOpClasses> kNames = {"linear",    "attention", "norm",    "elementwise",
                                                                 "embedding", "loss",      "conv",    "pool",
                                                                 "optimizer", "grad_norm", "convert", "copy"};
  return kNames[size_t(c)];
}

bool OpTimes::any() const {
  for (int64_t n : calls)
    if (n > 0) return true;
  return false;
}

void register_device_op_timer(DeviceOpTimer* timer) { g_device_timer = timer; }

void set_op_timing(bool on) { op_timing_flag().store(on, std::memory_order_relaxed); }

void OpScope::start(OpClass c, bool on_device) {
  if (t_depth > 0) return;  // inside another op's scope
  DeviceOpTimer* timer = on_device ? g_device_timer.load() : nullptr;
  if (timer != nullptr) {
    token_ = timer->begin(c);
  } else {
    t0_ns_ = now_ns();
  }
  ++t_depth;
  active_ = true;
  class_ = c;
}

void OpScope::stop() {
  --t_depth;
  if (token_ >= 0) {
    g_device_timer.load()->end(token_);
    return;
  }
  g_host_ns[size_t(class_)].fetch_add(now_ns() - t0_ns_, std::memory_order_relaxed);
  g_host_calls[size_t(class_)].fetch_add(1, std::memory_order_relaxed);
}

OpTimes take_op_times() {
  OpTimes t;
  for (size_t i = 0; i < kOpClasses; ++i) {
    t.seconds[i] = double(g_host_ns[i].exchange(0, std::memory_order_relaxed)) * 1e-9;
    t.calls[i] = g_host_calls[i].exchange(0, std::memory_order_relaxed);
  }
  if (DeviceOpTimer* timer = g_device_timer.load()) timer->collect(t);
  return t;
}

}  // namespace shardtrain
