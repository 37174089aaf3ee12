#include "runtime/core/device_memory.h"

#include "runtime/core/error.h"
#include "runtime/core/tensor.h"

#include <atomic>
#include <cstring>

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
  ST_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype(),
           "copy_tensor: {} {} into {} {}", src.shape().str(), dtype_name(src.dtype()),
           dst.shape().str(), dtype_name(dst.dtype()));
  if (src.nbytes() == 0) return;
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    std::memmove(dst.raw(), src.raw(), src.nbytes());
    return;
  }
  device_memory_ops().copy(dst.raw(), dst.device(), src.raw(), src.device(), src.nbytes());
}

void copy_input_async(const Tensor& dst, const Tensor& src, int slot) {
  if (dst.device().is_cpu()) return copy_tensor(dst, src);
  ST_CHECK(src.device().is_cpu() && dst.numel() == src.numel() && dst.dtype() == src.dtype(),
           "copy_input_async: {} {} on {} into {} {} on {}", src.shape().str(), dtype_name(src.dtype()),
           src.device().str(), dst.shape().str(), dtype_name(dst.dtype()), dst.device().str());
  ST_CHECK(slot == 0 || slot == 1, "copy_input_async: input slot {} (0 or 1)", slot);
  if (src.nbytes() > 0)
    device_memory_ops().copy_input_async(dst.raw(), src.raw(), src.nbytes(), dst.device(), slot);
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
