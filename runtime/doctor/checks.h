// The doctor's checks, one area per file: each reads what it needs from the
// probe context and adds findings, recommended settings and fingerprint
// entries to the node's report.
#pragma once

#include "kernels/devices.h"
#include "runtime/doctor/node_report.h"
#include "runtime/doctor/pci_affinity.h"
#include "runtime/doctor/rdma_ports.h"
#include "runtime/doctor/sys_root.h"

#include <algorithm>
#include <string>
#include <vector>

namespace shardtrain::doctor {

struct ProbeContext {
  const SysRoot& sys;
  const Environment& env;
  std::vector<RdmaDevice> rdma;
  std::vector<PciGpu> gpus;  // from the PCI bus
  // What CUDA sees (asked once, on a live node with the CUDA backend);
  // cuda_asked false: not asked, cuda_why: why it sees none.
  bool cuda_asked = false;
  std::vector<AcceleratorInfo> cuda;
  std::string cuda_why;
  bool live = true;       // the machine this process runs on (not a fixture root): ask CUDA, MPI, NCCL too
  bool thorough = true;   // also run what costs seconds (ucx_info)
  std::string data_path;  // the job's data; empty: not checked

  std::string env_or(const std::string& name, const std::string& fallback = {}) const;
  bool has_active_hardware_rdma() const;
  bool has_active_rdma() const;
  // GPUs on the node: CUDA's count or the PCI bus's, whichever is larger.
  int gpu_count() const { return std::max(int(cuda.size()), int(gpus.size())); }
};

void check_rdma(const ProbeContext& ctx, NodeReport& r);          // rdma_checks.cpp
void check_gpus(const ProbeContext& ctx, NodeReport& r);          // gpu_checks.cpp
void check_mpi(const ProbeContext& ctx, NodeReport& r);           // mpi_checks.cpp
void check_nccl(const ProbeContext& ctx, NodeReport& r);          // nccl_checks.cpp
void check_data_storage(const ProbeContext& ctx, NodeReport& r);  // storage_checks.cpp

// The interface of the default IPv4 route (/proc/net/route), "" when none.
std::string default_route_interface(const SysRoot& sys);

}  // namespace shardtrain::doctor
