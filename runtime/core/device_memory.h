// Copies and fills of device memory, seen from below the kernels. runtime/core
// knows no CUDA: the CUDA backend registers its implementation when it brings
// up a device (kernels/cuda/context.h), and every other device call from the
// layers above goes through Tensor (fill_zero) or copy_tensor here. Without a
// registered backend these calls on a non-CPU tensor fail with an Error that
// says so.
#pragma once

#include "runtime/core/device.h"

#include <cstddef>

namespace shardtrain {

class Tensor;

class DeviceMemoryOps {
 public:
  virtual ~DeviceMemoryOps() = default;
  // Zero `bytes` at `ptr` on `device`; ordered on the device's compute stream.
  virtual void fill_zero(void* ptr, size_t bytes, Device device) = 0;
  // Copy between any two of host and device memory. Ordered on the compute
  // stream; returns once host memory on either side may be used again (a
  // device-to-host copy has landed, a host-to-device copy has read its
  // source).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) = 0;
  // Wait until everything issued to the device's compute stream has finished.
  virtual void synchronize(Device device) = 0;
  // An input batch from (pinned) host memory to the device on the copy
  // stream; the compute stream waits for it by an event before its next
  // kernel. Returns at once: `src` must stay unchanged until the compute
  // stream has passed that point (the next read of a result from it).
  virtual void copy_input_async(void* dst, const void* src, size_t bytes, Device device) = 0;
  // Device time of the last input copy that has completed (event-timed), in
  // seconds; 0 before the first.
  virtual double last_input_copy_seconds() = 0;
};

void register_device_memory_ops(DeviceMemoryOps* ops);
// The registered implementation; an Error when there is none (no CUDA backend
// in this build, or no device brought up).
DeviceMemoryOps& device_memory_ops();
bool device_memory_ops_registered();

// dst := src for tensors of equal numel and dtype on any devices.
void copy_tensor(const Tensor& dst, const Tensor& src);
// An input batch host -> device (copy_input_async); a plain copy when both
// are on the host.
void copy_input_async(const Tensor& dst, const Tensor& src);
// A new tensor on `device` holding t's values (t itself when already there).
Tensor to_device(const Tensor& t, Device device);

}  // namespace shardtrain
