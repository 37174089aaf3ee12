#include "runtime/doctor/pci_affinity.h"

#include <charconv>

namespace shardtrain::doctor {
namespace {

// "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0" ->
// {"pci0000:00", "0000:00:01.0", "0000:01:00.0"}: the host bridge, then each
// bridge down to the function itself.
std::vector<std::string> pci_hops(const std::string& path) {
  std::vector<std::string> hops;
  const std::string prefix = "/sys/devices/";
  if (path.compare(0, prefix.size(), prefix) != 0) return hops;
  size_t start = prefix.size();
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    hops.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return hops;
}

}  // namespace

std::vector<PciGpu> scan_nvidia_gpus(const SysRoot& sys) {
  std::vector<PciGpu> gpus;
  for (const std::string& addr : sys.list("/sys/bus/pci/devices")) {
    const std::string dir = "/sys/bus/pci/devices/" + addr;
    const auto vendor = sys.read(dir + "/vendor");
    const auto cls = sys.read(dir + "/class");
    if (!vendor || *vendor != "0x10de" || !cls || cls->compare(0, 4, "0x03") != 0) continue;
    PciGpu g;
    g.address = addr;
    g.pci_path = sys.resolve(dir).value_or("");
    const auto numa = sys.read(dir + "/numa_node");
    if (numa) std::from_chars(numa->data(), numa->data() + numa->size(), g.numa_node);
    gpus.push_back(g);
  }
  return gpus;
}

PciDistance pci_distance(const std::string& path_a, int numa_a, const std::string& path_b, int numa_b) {
  const auto a = pci_hops(path_a);
  const auto b = pci_hops(path_b);
  if (a.size() < 2 || b.size() < 2) return PciDistance::unknown;
  if (a.front() != b.front()) {
    if (numa_a < 0 || numa_b < 0) return PciDistance::other_host_bridge;
    return numa_a == numa_b ? PciDistance::same_numa : PciDistance::cross_numa;
  }
  // Bridges both paths share below the host bridge (not the functions themselves).
  size_t shared = 0;
  while (shared + 2 < a.size() && shared + 2 < b.size() && a[shared + 1] == b[shared + 1]) ++shared;
  return shared > 0 ? PciDistance::same_switch : PciDistance::host_bridge;
}

const char* describe(PciDistance d) {
  switch (d) {
    case PciDistance::same_switch: return "PIX/PXB (same PCIe switch)";
    case PciDistance::host_bridge: return "PHB (through the CPU's host bridge)";
    case PciDistance::same_numa: return "NODE (same NUMA node, different host bridges)";
    case PciDistance::cross_numa: return "SYS (across the CPU interconnect)";
    case PciDistance::other_host_bridge: return "different host bridges (NUMA node unknown)";
    case PciDistance::unknown: break;
  }
  return "unknown (a device without a PCI function)";
}

}  // namespace shardtrain::doctor
