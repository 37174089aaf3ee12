// GPUs: how many, which NIC is closest to each on the PCIe tree, and whether
// GPUDirect RDMA can work at all (nvidia_peermem, or DMA-BUF through NVIDIA's
// open kernel module on Linux >= 5.12).
#include "runtime/doctor/checks.h"

#include <fmt/format.h>

#include <charconv>

namespace shardtrain::doctor {
namespace {

// Linux "5.15.0-91-generic" -> {5, 15}; {0, 0} when unknown.
std::pair<int, int> kernel_version(const SysRoot& sys) {
  const auto rel = sys.read("/proc/sys/kernel/osrelease");
  if (!rel) return {0, 0};
  int major = 0, minor = 0;
  const char* end = rel->data() + rel->size();
  const auto [dot, ec] = std::from_chars(rel->data(), end, major);
  if (ec != std::errc() || dot == end || *dot != '.' || std::from_chars(dot + 1, end, minor).ec != std::errc())
    return {0, 0};
  return {major, minor};
}

}  // namespace

void check_gpus(const ProbeContext& ctx, NodeReport& r) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& d : ctx.cuda)
    gpus.push_back({{"index", d.index},
                    {"name", d.name},
                    {"compute_capability", d.compute_capability},
                    {"memory_bytes", d.total_memory_bytes}});
  if (ctx.cuda_asked && ctx.cuda.empty() && ctx.gpus.empty()) r.facts["cuda"] = ctx.cuda_why;
  nlohmann::json pci = nlohmann::json::array();
  for (const auto& g : ctx.gpus)
    pci.push_back({{"address", g.address}, {"pci_path", g.pci_path}, {"numa_node", g.numa_node}});
  r.facts["gpus"] = gpus;
  r.facts["gpus_pci"] = pci;
  const int count = ctx.gpu_count();
  r.fingerprint["gpus"] = std::to_string(count);
  if (count <= 0) {
    r.add("gpus", Verdict::ok, "no NVIDIA GPU: a CPU node");
    return;
  }
  if (ctx.cuda_asked && ctx.cuda.empty())
    r.add("gpus", Verdict::fail, fmt::format("{} NVIDIA GPU(s) on the PCI bus, but CUDA sees none", ctx.gpus.size()),
          "check the driver (`nvidia-smi`) and CUDA_VISIBLE_DEVICES");
  else
    r.add("gpus", Verdict::ok, fmt::format("{} NVIDIA GPU(s)", count));

  if (!ctx.has_active_hardware_rdma()) return;  // no NIC to do GPUDirect RDMA with

  // Each GPU's nearest NIC with a port up.
  nlohmann::json affinity = nlohmann::json::array();
  for (const auto& g : ctx.gpus) {
    PciDistance best = PciDistance::unknown;
    std::string nic;
    for (const auto& d : ctx.rdma) {
      if (!d.any_port_active() || d.software) continue;
      const PciDistance dist = pci_distance(g.pci_path, g.numa_node, d.pci_path, d.numa_node);
      if (nic.empty() || dist < best) {
        best = dist;
        nic = d.name;
      }
    }
    if (nic.empty()) continue;
    affinity.push_back({{"gpu", g.address}, {"nic", nic}, {"distance", describe(best)}});
    if (best == PciDistance::same_switch)
      r.add("gpu-nic", Verdict::ok, fmt::format("GPU {} -> {}: {}", g.address, nic, describe(best)));
    else
      r.add("gpu-nic", Verdict::warn, fmt::format("GPU {} -> nearest NIC {}: {}", g.address, nic, describe(best)),
            "GPUDirect RDMA is fast only under one PCIe switch; NCCL uses it up to NCCL_NET_GDR_LEVEL and "
            "stages through host memory beyond: bind each rank to the GPU and NIC that share a switch "
            "(shardrun does), or expect host-staged bandwidth");
  }
  r.facts["gpu_nic_affinity"] = affinity;

  const bool peermem = ctx.sys.exists("/sys/module/nvidia_peermem");
  const auto driver = ctx.sys.read("/proc/driver/nvidia/version");
  const bool open_module = driver && driver->find("Open Kernel Module") != std::string::npos;
  const auto [kmaj, kmin] = kernel_version(ctx.sys);
  const bool dmabuf = open_module && (kmaj > 5 || (kmaj == 5 && kmin >= 12));
  r.facts["gpudirect"] = {{"nvidia_peermem", peermem},
                          {"dmabuf", dmabuf},
                          {"open_kernel_module", open_module},
                          {"kernel", fmt::format("{}.{}", kmaj, kmin)}};
  r.fingerprint["gpudirect"] = peermem ? "nvidia_peermem" : dmabuf ? "dmabuf" : "none";
  if (peermem)
    r.add("gpudirect", Verdict::ok, "GPUDirect RDMA: nvidia_peermem is loaded");
  else if (dmabuf)
    r.add("gpudirect", Verdict::ok,
          fmt::format("GPUDirect RDMA: DMA-BUF (NVIDIA's open kernel module, Linux {}.{})", kmaj, kmin));
  else
    r.add("gpudirect", Verdict::fail,
          "GPUDirect RDMA unavailable: nvidia_peermem is not loaded and DMA-BUF needs NVIDIA's open kernel module "
          "on Linux >= 5.12",
          "`modprobe nvidia-peermem` (or install the open kernel module); without it NCCL copies every message "
          "through host memory");
}

}  // namespace shardtrain::doctor
