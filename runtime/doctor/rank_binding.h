// Where a rank should run on its node: its GPU (node-local rank modulo the
// GPUs, in PCI order as CUDA counts them with CUDA_DEVICE_ORDER=PCI_BUS_ID),
// the RDMA port nearest that GPU on the PCIe tree, and the cores of the GPU's
// NUMA node; on a CPU node, a block of ranks per NUMA node. `shardrun --bind
// auto` asks for it (SHARDTRAIN_BIND=auto) and shardtrain applies it before
// MPI, UCX or NCCL start, so each reads the NIC it was given.
#pragma once

#include "runtime/doctor/node_report.h"
#include "runtime/doctor/sys_root.h"

#include <string>

namespace shardtrain::doctor {

struct RankBinding {
  int local_rank = 0;
  int local_size = 1;
  std::string gpu;  // PCI address; "" on a CPU node
  int numa_node = -1;
  std::string cpus;  // a cpulist ("0-15,32-47"); "" leaves the affinity alone
  std::string nic;   // "mlx5_0:1"; "" when no RDMA port is up
  std::string note;  // why something was left alone
  std::string describe() const;
};

// The node-local rank and ranks per node the launcher gave this process
// (Open MPI, Slurm, MPICH/PMI); {-1, 0} when none did.
std::pair<int, int> launcher_local_rank(const Environment& env);

RankBinding plan_binding(const SysRoot& sys, const Environment& env, int local_rank, int local_size);

// Pins this process to binding.cpus (those of them it may use; none: left
// alone, and the record says why) and sets, unless the job set them
// already, NCCL_IB_HCA and UCX_NET_DEVICES to its NIC and CUDA_DEVICE_ORDER
// to PCI_BUS_ID; records what it did in SHARDTRAIN_BINDING.
void apply_binding(RankBinding binding);

// What `shardrun --bind` asks through SHARDTRAIN_BIND: "auto" plans and
// applies the binding of the launcher's node-local rank (nothing outside a
// launcher); unset or "none" leaves everything alone; anything else is an Error.
void bind_as_the_launcher_asks();

// This process's CPU affinity as a cpulist.
std::string current_cpus();

}  // namespace shardtrain::doctor
