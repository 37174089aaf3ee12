// What NCCL's own INFO output says about the fabric a GPU job runs on: which
// network transport NCCL picked (InfiniBand, RoCE, TCP sockets, or none: one
// node over NVLink/PCIe), whether its network transfers use GPUDirect RDMA,
// which NICs, and how many ring/tree channels go over the network versus
// peer-to-peer. The classic silent slowdowns it catches:
//   - RoCE/IB without GPUDirect RDMA (no nvidia-peermem, no DMA-BUF): every
//     transfer is staged through host memory;
//   - NCCL falling back to sockets although IB/RoCE devices exist
//     (NCCL_IB_DISABLE, a wrong NCCL_IB_HCA, a missing verbs library);
//   - inter-node traffic over TCP sockets at all.
//
// The lines come from NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH
// (nccl_debug_environment()), written per process into <rundir>/nccl/. CPU
// code only: it reads text, it never loads NCCL.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardtrain::telemetry {

struct FabricReport {
  std::string nccl_version;     // "2.27.3+cuda13.0"; empty if not seen
  int cuda_driver_version = 0;  // "cudaDriverVersion 13000"; 0 if not seen
  // "IB" | "RoCE" | "Socket" | "P2P/SHM only" | "unknown" (or another NET
  // plugin's name, e.g. "AWS Libfabric", as NCCL reports it)
  std::string transport = "unknown";
  // Whether network transfers use GPUDirect RDMA; nullopt when unknown or
  // meaningless (no network transport).
  std::optional<bool> gpudirect_rdma;
  std::vector<std::string> devices;     // NICs NCCL uses: "mlx5_0:1/RoCE", "eth0"
  std::vector<std::string> ib_devices;  // IB/RoCE HCAs NCCL found ("NET/IB : Using"), even when unused
  int channels_net = 0;                 // channel connections via NET/...
  int channels_net_gdr = 0;             //   of which via .../GDRDMA
  int channels_p2p = 0;                 // via P2P/... (NVLink, PCIe)
  int channels_shm = 0;                 // via SHM/... (through host shared memory)
  int nodes = 0;                        // "nNodes"; 0 if not seen
  int ranks = 0;                        // "nRanks"/"nranks"; 0 if not seen
  bool init_complete = false;           // "Init COMPLETE" seen
  std::vector<std::string> settings;    // "NCCL_NET_GDR_LEVEL set by environment to 0", ...
  std::vector<std::string> warnings;
};

// Parses NCCL's log lines (of one or several processes, interleaved or
// concatenated); unrelated lines are ignored.
FabricReport parse_nccl_log(std::string_view text);
// Every regular file in `dir` (the run's nccl/ folder) parsed together; an
// empty report (transport "unknown") when there is none.
FabricReport read_nccl_logs(const std::string& dir);

// A few lines for the run log: "NCCL 2.27.3+cuda13.0: RoCE (mlx5_0, mlx5_1),
// GPUDirect RDMA on; 16 channel connections via NET, 48 via P2P; 2 nodes"
// then one "warning: ..." line per warning.
std::string fabric_summary_text(const FabricReport& report);
// The same as JSON (fabric.json / the summary's "fabric" entry).
nlohmann::json fabric_json(const FabricReport& report);

// The environment that makes NCCL write those lines into `dir` (one file per
// process, named after `rank`, the host and the pid), without overriding what
// the user set: NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,
// NCCL_DEBUG_FILE=<dir>/rank-<rank>.%h.%p.log. set_nccl_debug_environment
// applies it (setenv) and must run before NCCL's first communicator.
std::vector<std::pair<std::string, std::string>> nccl_debug_environment(const std::string& dir, int rank);
void set_nccl_debug_environment(const std::string& dir, int rank);

}  // namespace shardtrain::telemetry
