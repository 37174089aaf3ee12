// Copies and fills of device memory, seen from below the kernels. runtime/core
// knows no CUDA: the CUDA backend registers its implementation when it brings
// up a device (kernels/cuda/context.h), and every other device call from the
// layers above goes through Tensor (fill_zero) or copy_tensor here. Without a
// registered backend these calls on a non-CPU tensor fail with an Error that
// says so.
#pragma once

#include "runtime/core/device.h"

#include <cstddef>
#include <initializer_list>
#include <span>

namespace shardtrain {

class Tensor;

// One buffer of an input batch: pinned host memory -> device memory.
struct HostToDevice {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class DeviceMemoryOps {
 public:
  virtual ~DeviceMemoryOps() = default;
  // Zero `bytes` at `ptr` on `device`; ordered on the device's compute stream.
  virtual void fill_zero(void* ptr, size_t bytes, Device device) = 0;
  // Copy between any two of host and device memory. Ordered on the compute
  // stream; returns once host memory on either side may be used again (a
  // device-to-host copy has landed, a host-to-device copy has read its
  // source). A copy that waits also raises an error a kernel found earlier
  // (an embedding id outside its table; kernels/cuda/context.h).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) = 0;
  // Wait until everything issued to the device's compute stream has finished;
  // then raise an error a kernel found, as copy does.
  virtual void synchronize(Device device) = 0;
  // An input batch (its buffers: samples, labels) from pinned host memory
  // into input slot `slot` (0 or 1) on the device, on the copy stream, as
  // one copy as far as the streams see it. Two slots let the copy of step N+1
  // run while step N computes: the copy into a slot waits (by event, on the
  // device) until the compute stream has finished the work issued before
  // the previous call, the last step that may read this slot's device
  // buffer when the slots alternate (and the previous step itself when a
  // caller reuses one slot: then nothing overlaps, but nothing races).
  // The compute stream waits for the copy before its next kernel. Returns
  // at once: the sources must not change until wait_input_host_free(slot).
  virtual void copy_input_async(std::span<const HostToDevice> parts, Device device, int slot) = 0;
  // Blocks until the last copy out of `slot`'s host buffer has read it, so
  // the host may refill that buffer.
  virtual void wait_input_host_free(int slot) = 0;
  // How long the compute stream waited for the last input copy that has
  // completed (event-timed; the part of the copy the step before did not
  // hide), in seconds; 0 before the first.
  virtual double last_input_copy_seconds() = 0;
  // Device -> pinned host memory on the compute stream, after the work
  // issued before it, without waiting: `dst` holds the values once
  // wait_read_back() returns (a step's losses, read once at its end while
  // the device goes on). One read-back is outstanding at a time.
  // wait_read_back raises an error a kernel found before the read-back.
  virtual void read_back_async(void* dst, const void* src, size_t bytes, Device device) = 0;
  virtual void wait_read_back() = 0;
};

void register_device_memory_ops(DeviceMemoryOps* ops);
// The registered implementation; an Error when there is none (no CUDA backend
// in this build, or no device brought up).
DeviceMemoryOps& device_memory_ops();
bool device_memory_ops_registered();

// dst := src for tensors of equal numel and dtype on any devices.
void copy_tensor(const Tensor& dst, const Tensor& src);
// An input batch host -> device through input slot `slot`
// (DeviceMemoryOps::copy_input_async): each pair's src (pinned host) into its
// dst (device), equal numel and dtype; plain copies when both are on the host.
struct InputPart {
  const Tensor& dst;
  const Tensor& src;
};
void copy_input_async(std::initializer_list<InputPart> parts, int slot = 0);
// DeviceMemoryOps::read_back_async / wait_read_back: device `src` into the
// host tensor `dst` (pinned), waited for later; a plain copy on the host.
void read_back_async(const Tensor& dst, const Tensor& src);
void wait_read_back(Device device);
// DeviceMemoryOps::wait_input_host_free; nothing to wait for without a device.
void wait_input_host_free(int slot);
// A new tensor on `device` holding t's values (t itself when already there).
Tensor to_device(const Tensor& t, Device device);

}  // namespace shardtrain
