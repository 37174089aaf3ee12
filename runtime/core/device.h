// Where a tensor's bytes live. Kernels are chosen by the tensor's device.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace shardtrain {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceKind::cpu, 0}; }
  static constexpr Device cuda(int i) { return {DeviceKind::cuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }
};

// Devices whose byte accounting is kept: the CPU plus this many GPUs.
inline constexpr int kMaxCudaDevices = 16;

}  // namespace shardtrain
