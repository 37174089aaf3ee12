// Where GPUs and NICs sit on the PCIe tree, from sysfs, and how far apart two
// devices are, in the terms nvidia-smi topo and NCCL use: under one PCIe
// switch (PIX/PXB), through the CPU's host bridge (PHB), on the same NUMA node
// across host bridges (NODE), or across the CPU interconnect (SYS).
// GPUDirect RDMA is fast only for the first.
#pragma once

#include "runtime/doctor/sys_root.h"

#include <string>
#include <vector>

namespace shardtrain::doctor {

struct PciGpu {
  std::string address;   // "0000:3b:00.0"
  std::string pci_path;  // links followed
  int numa_node = -1;
};

// NVIDIA display and 3D controllers on the PCI bus (vendor 0x10de, class 0x03).
std::vector<PciGpu> scan_nvidia_gpus(const SysRoot& sys);

enum class PciDistance { same_switch, host_bridge, same_numa, cross_numa, other_host_bridge, unknown };

// The distance between two PCI functions given their paths (links followed)
// and NUMA nodes (-1: unknown). `unknown` when either has no path.
PciDistance pci_distance(const std::string& path_a, int numa_a, const std::string& path_b, int numa_b);

// "PIX/PXB (same PCIe switch)", ...
const char* describe(PciDistance d);

}  // namespace shardtrain::doctor
