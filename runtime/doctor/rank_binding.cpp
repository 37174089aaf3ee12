#include "runtime/doctor/rank_binding.h"

#include "runtime/core/error.h"
#include "runtime/doctor/int_ranges.h"
#include "runtime/doctor/pci_affinity.h"
#include "runtime/doctor/rdma_ports.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace shardtrain::doctor {
namespace {

int env_int(const Environment& env, const char* name) {
  const auto it = env.find(name);
  if (it == env.end()) return -1;
  int v = -1;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return ec == std::errc() && end == it->second.data() + it->second.size() ? v : -1;
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; empty on anything else.
std::vector<int> parse_cpulist(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream ss(list);
  for (std::string part; std::getline(ss, part, ',');) {
    int a = 0, b = 0;
    const size_t dash = part.find('-');
    const std::string lo = part.substr(0, dash), hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (std::from_chars(lo.data(), lo.data() + lo.size(), a).ec != std::errc() ||
        std::from_chars(hi.data(), hi.data() + hi.size(), b).ec != std::errc() || b < a)
      return {};
    for (int c = a; c <= b; ++c) cpus.push_back(c);
  }
  return cpus;
}

// NUMA nodes with CPUs: {node, cpulist}.
std::vector<std::pair<int, std::string>> numa_nodes(const SysRoot& sys) {
  std::vector<std::pair<int, std::string>> nodes;
  for (const std::string& name : sys.list("/sys/devices/system/node")) {
    int n = 0;
    if (name.rfind("node", 0) != 0 || std::from_chars(name.data() + 4, name.data() + name.size(), n).ec != std::errc())
      continue;
    const auto cpus = sys.read("/sys/devices/system/node/" + name + "/cpulist");
    if (cpus && !cpus->empty()) nodes.emplace_back(n, *cpus);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace

std::pair<int, int> launcher_local_rank(const Environment& env) {
  const std::pair<const char*, const char*> sources[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},  // Open MPI's mpirun
      {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},                    // srun
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},                        // MPICH's hydra
  };
  for (const auto& [rank, size] : sources) {
    const int r = env_int(env, rank);
    if (r < 0) continue;
    int n = env_int(env, size);
    if (const auto it = env.find("SLURM_TASKS_PER_NODE"); n < 0 && it != env.end()) {
      // "4(x2),3": the first node's count; srun places blocks of this size.
      n = 0;
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
    }
    return {r, std::max(n, r + 1)};
  }
  return {-1, 0};
}

std::string RankBinding::describe() const {
  std::string s = fmt::format("local rank {}/{}", local_rank, local_size);
  if (!gpu.empty()) s += fmt::format(", GPU {}", gpu);
  s += numa_node >= 0 ? fmt::format(", NUMA node {}", numa_node) : "";
  s += cpus.empty() ? ", cpus unbound" : ", cpus " + cpus;
  s += nic.empty() ? ", no RDMA port" : ", NIC " + nic;
  if (!note.empty()) s += " (" + note + ")";
  return s;
}

RankBinding plan_binding(const SysRoot& sys, const Environment& env, int local_rank, int local_size) {
  RankBinding b;
  b.local_rank = local_rank;
  b.local_size = std::max(local_size, local_rank + 1);
  const auto nodes = numa_nodes(sys);
  const auto gpus = scan_nvidia_gpus(sys);  // sorted by address: PCI_BUS_ID order
  std::string gpu_path;
  if (!gpus.empty() && env.count("CUDA_VISIBLE_DEVICES") == 0) {
    const PciGpu& g = gpus[size_t(local_rank) % gpus.size()];
    b.gpu = g.address;
    b.numa_node = g.numa_node;
    gpu_path = g.pci_path;
  } else if (!gpus.empty()) {
    b.note = "CUDA_VISIBLE_DEVICES is set: GPU left to it";
  }
  if (b.gpu.empty() && nodes.size() > 1)  // CPU ranks: consecutive blocks per NUMA node
    b.numa_node = nodes[size_t(local_rank) * nodes.size() / size_t(b.local_size)].first;
  for (const auto& [n, cpus] : nodes)
    if (n == b.numa_node) b.cpus = cpus;

  // The nearest active RDMA port; ranks that tie share them round robin.
  std::vector<std::pair<PciDistance, std::string>> ports;
  for (const RdmaDevice& d : scan_rdma_devices(sys))
    for (const RdmaPort& p : d.ports) {
      if (!p.active()) continue;
      PciDistance dist = PciDistance::unknown;
      if (!gpu_path.empty()) {
        dist = pci_distance(gpu_path, b.numa_node, d.pci_path, d.numa_node);
      } else if (b.numa_node >= 0 && d.numa_node >= 0) {
        dist = d.numa_node == b.numa_node ? PciDistance::same_numa : PciDistance::cross_numa;
      }
      ports.emplace_back(dist, fmt::format("{}:{}", d.name, p.number));
    }
  if (!ports.empty()) {
    PciDistance best = PciDistance::unknown;
    for (const auto& [dist, name] : ports) best = std::min(best, dist);
    std::vector<std::string> nearest;
    for (const auto& [dist, name] : ports)
      if (dist == best) nearest.push_back(name);
    b.nic = nearest[size_t(local_rank) % nearest.size()];
  }
  return b;
}

void apply_binding(RankBinding b) {
  if (!b.cpus.empty()) {
    // Only cpus the process may use: a scheduler's cgroup or the launcher
    // may allow fewer than the NUMA node has, and pinning outside them fails.
    cpu_set_t allowed, set;
    CPU_ZERO(&allowed);
    CPU_ZERO(&set);
    ST_CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "binding: cannot read this process's cpus");
    std::vector<int> chosen;
    for (int c : parse_cpulist(b.cpus))
      if (c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) {
        CPU_SET(c, &set);
        chosen.push_back(c);
      }
    if (chosen.empty()) {
      b.note = fmt::format("cpus {} are outside the {} this process may use: left alone", b.cpus, current_cpus());
      b.cpus.clear();
    } else {
      b.cpus = int_ranges(chosen);
      ST_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, "binding: cannot pin local rank {} to cpus {}",
               b.local_rank, b.cpus);
    }
  }
  if (!b.nic.empty()) {
    ::setenv("NCCL_IB_HCA", ("=" + b.nic).c_str(), 0);  // 0: what the job set stays
    ::setenv("UCX_NET_DEVICES", b.nic.c_str(), 0);
  }
  if (!b.gpu.empty()) ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  ::setenv("SHARDTRAIN_BINDING", b.describe().c_str(), 1);
}

void bind_as_the_launcher_asks() {
  const char* mode = std::getenv("SHARDTRAIN_BIND");
  if (mode == nullptr || std::string(mode) == "none" || std::string(mode).empty()) return;
  ST_CHECK(std::string(mode) == "auto", "SHARDTRAIN_BIND = '{}': expected auto or none", mode);
  const Environment env = process_environment();
  const auto [local_rank, local_size] = launcher_local_rank(env);
  if (local_rank < 0) return;  // not started by a launcher: one process, nothing to place
  apply_binding(plan_binding(SysRoot("/"), env, local_rank, local_size));
}

std::string current_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return int_ranges(cpus);
}

}  // namespace shardtrain::doctor
