#include "runtime/core/device_memory.h"

#include "runtime/core/error.h"
#include "runtime/core/op_timing.h"
#include "runtime/core/tensor.h"

#include <atomic>
#include <cstring>
#include <vector>

namespace shardtrain {
namespace {
std::atomic<DeviceMemoryOps*> g_ops{nullptr};
}

void register_device_memory_ops(DeviceMemoryOps* ops) { g_ops = ops; }

bool device_memory_ops_registered() { return g_ops.load() != nullptr; }

DeviceMemoryOps& device_memory_ops() {
  DeviceMemoryOps* ops = g_ops.load();
  ST_CHECK(ops != nullptr,
           "device memory used, but no CUDA device was brought up in this process "
           "(train.device = \"cuda\" needs a build with the CUDA backend and a visible GPU)");
  return *ops;
}

void copy_tensor(const Tensor& dst, const Tensor& src) {
  ST_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype(), "copy_tensor: {} {} into {} {}", src.shape().str(),
           dtype_name(src.dtype()), dst.shape().str(), dtype_name(dst.dtype()));
  if (src.nbytes() == 0) return;
  const bool host = dst.device().is_cpu() && src.device().is_cpu();
  const OpScope timed(OpClass::copy, !host);
  if (host) {
    std::memmove(dst.raw(), src.raw(), src.nbytes());
    return;
  }
  device_memory_ops().copy(dst.raw(), dst.device(), src.raw(), src.device(), src.nbytes());
}

void copy_input_async(std::initializer_list<InputPart> parts, int slot) {
  ST_CHECK(slot == 0 || slot == 1, "copy_input_async: input slot {} (0 or 1)", slot);
  std::vector<HostToDevice> copies;
  Device device = Device::cpu();
  for (const InputPart& p : parts) {
    if (p.dst.device().is_cpu()) {
      copy_tensor(p.dst, p.src);
      continue;
    }
    ST_CHECK(p.src.device().is_cpu() && p.dst.numel() == p.src.numel() && p.dst.dtype() == p.src.dtype() &&
                 (copies.empty() || p.dst.device() == device),
             "copy_input_async: {} {} on {} into {} {} on {}", p.src.shape().str(), dtype_name(p.src.dtype()),
             p.src.device().str(), p.dst.shape().str(), dtype_name(p.dst.dtype()), p.dst.device().str());
    device = p.dst.device();
    if (p.src.nbytes() > 0) copies.push_back({p.dst.raw(), p.src.raw(), p.src.nbytes()});
  }
  if (!copies.empty()) device_memory_ops().copy_input_async(copies, device, slot);
}

void read_back_async(const Tensor& dst, const Tensor& src) {
  ST_CHECK(dst.device().is_cpu() && dst.numel() == src.numel() && dst.dtype() == src.dtype(),
           "read_back_async: {} {} on {} into {} {} on {}", src.shape().str(), dtype_name(src.dtype()),
           src.device().str(), dst.shape().str(), dtype_name(dst.dtype()), dst.device().str());
  if (src.device().is_cpu()) return copy_tensor(dst, src);
  if (src.nbytes() > 0) device_memory_ops().read_back_async(dst.raw(), src.raw(), src.nbytes(), src.device());
}

void wait_read_back(Device device) {
  if (!device.is_cpu()) device_memory_ops().wait_read_back();
}

void wait_input_host_free(int slot) {
  if (device_memory_ops_registered()) device_memory_ops().wait_input_host_free(slot);
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  copy_tensor(out, t);
  return out;
}

}  // namespace shardtrain
