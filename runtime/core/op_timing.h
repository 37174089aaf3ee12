// Where a step's compute goes, by class of op (telemetry.op_timing): every
// op of kernels/ops.h and every copy_tensor runs inside an OpScope, which,
// when timing is on, adds the op's time to its class. On the host that is
// the op's wall time; on a GPU the op's kernels are bracketed by two events
// on the compute stream (the backend registers a DeviceOpTimer), so the
// figure is the device's time, not the launch's. Off (the default), a scope
// costs one relaxed atomic load.
//
// Timing on changes what it measures a little: on a GPU, take_op_times waits
// for the device at every step's end (the next step's launches no longer
// overlap this step's tail), and each op adds two event records. The step
// times of a run with it on are not the step times of one without.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace shardtrain {

enum class OpClass : uint8_t {
  linear,       // GEMMs of linear layers (and their bias)
  attention,    // attention's products and softmax
  norm,         // layer norm
  elementwise,  // activations, residual adds, scaling
  embedding,    // token and position tables
  loss,         // softmax cross-entropy, accuracy
  conv,         // convolutions (im2col + GEMM)
  pool,         // pooling
  optimizer,    // parameter updates
  grad_norm,    // gradient norms and clipping
  convert,      // f32 <-> bf16
  copy,         // copy_tensor: device <-> host, device <-> device, host buffers
};
inline constexpr size_t kOpClasses = 12;
const char* op_class_name(OpClass c);

// Seconds and calls per class since the last take_op_times().
struct OpTimes {
  std::array<double, kOpClasses> seconds{};
  std::array<int64_t, kOpClasses> calls{};
  bool any() const;
};

// GPU timing, registered by the CUDA backend when it brings up a device.
class DeviceOpTimer {
 public:
  virtual ~DeviceOpTimer() = default;
  // Records a start event on the compute stream; the token goes to end().
  virtual int64_t begin(OpClass c) = 0;
  virtual void end(int64_t token) = 0;
  // Waits for the events recorded so far, adds their elapsed times to `into`
  // and forgets them.
  virtual void collect(OpTimes& into) = 0;
};
void register_device_op_timer(DeviceOpTimer* timer);

void set_op_timing(bool on);
inline std::atomic<bool>& op_timing_flag() {
  static std::atomic<bool> on{false};
  return on;
}
inline bool op_timing_enabled() { return op_timing_flag().load(std::memory_order_relaxed); }

// Times the enclosing op. Nested scopes on one thread count once, in the
// outermost class (an op that copies belongs to the op).
class OpScope {
 public:
  OpScope(OpClass c, bool on_device) {
    if (op_timing_enabled()) start(c, on_device);
  }
  ~OpScope() {
    if (active_) stop();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  void start(OpClass c, bool on_device);
  void stop();

  bool active_ = false;
  OpClass class_ = OpClass::linear;
  int64_t token_ = -1;  // the device timer's, or -1: host clock
  int64_t t0_ns_ = 0;
};

// What the scopes recorded since the last call (on a GPU: waits for the
// device's events), and starts over.
OpTimes take_op_times();

}  // namespace shardtrain
