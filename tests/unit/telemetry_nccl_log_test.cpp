// NCCL INFO logs (formats as NCCL 2.5 - 2.28 print them) to the fabric report:
// transport, GPUDirect RDMA, devices and the warnings.
#include "runtime/telemetry/nccl_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace shardtrain::telemetry;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

namespace {

// Two nodes, one H200 each, RoCE with GPUDirect RDMA (DMA-BUF).
const char* kRoceGdr = R"(gpu-a:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
gpu-a:4101:4101 [0] NCCL INFO cudaDriverVersion 13000
gpu-a:4101:4101 [0] NCCL INFO NCCL version 2.27.3+cuda13.0
gpu-a:4101:4188 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.
gpu-a:4101:4188 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
gpu-a:4101:4188 [0] NCCL INFO Using network IB
gpu-a:4101:4188 [0] NCCL INFO DMA-BUF is available on GPU device 0
gpu-a:4101:4188 [0] NCCL INFO comm 0x55d1c0a3e2f0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f1c2b3a4d5e6f70 - Init START
gpu-a:4101:4188 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0'
gpu-a:4101:4188 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 1 'mlx5_1'
gpu-a:4101:4188 [0] NCCL INFO comm 0x55d1c0a3e2f0 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0
gpu-a:4101:4188 [0] NCCL INFO Channel 00/02 :    0   1
gpu-a:4101:4188 [0] NCCL INFO Channel 01/02 :    0   1
gpu-a:4101:4190 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
gpu-a:4101:4190 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IB/1/GDRDMA
gpu-a:4101:4190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
gpu-a:4101:4190 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA
gpu-a:4101:4190 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
gpu-a:4101:4188 [0] NCCL INFO comm 0x55d1c0a3e2f0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f1c2b3a4d5e6f70 - Init COMPLETE
)";

// Two nodes over InfiniBand, nvidia-peermem not loaded: no GDR.
const char* kIbNoGdr = R"(node1:5325:5325 [0] NCCL INFO Bootstrap : Using ib0:192.168.11.1<0>
node1:5325:5325 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
NCCL version 2.18.5+cuda12.2
node1:5325:5337 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:192.168.11.1<0>
node1:5325:5337 [0] NCCL INFO Using network IB
node1:5325:5337 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)
node1:5325:5337 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)
node1:5325:5338 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0
node2:74352:74372 [0] NCCL INFO Channel 00 : 1[1a000] -> 0[1a000] [receive] via NET/IB/0
node1:5325:5338 [0] NCCL INFO Channel 01 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0
node1:5325:5338 [0] NCCL INFO Channel 00 : 1[1a000] -> 0[1a000] [send] via NET/IB/0
node2:74352:74370 [0] NCCL INFO Channel 01 : 1[1a000] -> 0[1a000] [send] via NET/IB/1
node1:5325:5337 [0] NCCL INFO comm 0x8dd01c0 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0
node1:5325:5337 [0] NCCL INFO comm 0x8dd01c0 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE
)";

// IB devices present, but NCCL_IB_DISABLE=1: NCCL uses sockets between the nodes.
const char* kSocketFallback = R"(host-a:900:900 [0] NCCL INFO cudaDriverVersion 12040
host-a:900:900 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
host-a:900:930 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
host-a:900:930 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.5<0>
host-a:900:930 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0> [1]eth1:10.2.0.5<0>
host-a:900:930 [0] NCCL INFO Using network Socket
host-a:900:930 [0] NCCL INFO comm 0x5612 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0
host-a:900:931 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
host-a:900:931 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/Socket/1
host-a:900:931 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
host-a:900:931 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/1
host-a:900:930 [0] NCCL INFO comm 0x5612 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE
)";

// One node, two GPUs over NVLink; NCCL still announces its network.
const char* kSingleNodeP2p = R"(dgx:77:77 [0] NCCL INFO NCCL version 2.27.3+cuda13.0
dgx:77:77 [0] NCCL INFO cudaDriverVersion 13000
dgx:77:120 [0] NCCL INFO NET/IB : No device found.
dgx:77:120 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>
dgx:77:120 [0] NCCL INFO Using network Socket
dgx:77:120 [0] NCCL INFO comm 0x7f00 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
dgx:77:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
dgx:77:120 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM
dgx:78:121 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
dgx:78:121 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/IPC
dgx:77:120 [0] NCCL INFO Connected all rings
dgx:77:120 [0] NCCL INFO comm 0x7f00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE
)";

// Recorded (condensed) on an H200 VM with NCCL 2.28.9 from PyTorch's wheel,
// one rank: no IB device, NCCL announces sockets but moves nothing over them.
const char* kRecorded2289SingleRank = R"(vm:460:460 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so
vm:460:460 [0] NCCL INFO cudaDriverVersion 13000
vm:460:460 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
vm:460:460 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
vm:460:460 [0] NCCL INFO NET/IB : No device found.
vm:460:460 [0] NCCL INFO NET/IB : Using [RO]; OOB eth0:192.0.2.2<0>
vm:460:460 [0] NCCL INFO Failed to initialize NET plugin IB
vm:460:460 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>
vm:460:460 [0] NCCL INFO Initialized NET plugin Socket
vm:460:460 [0] NCCL INFO Assigned NET plugin Socket to comm
vm:460:460 [0] NCCL INFO Using network Socket
vm:460:460 [0] NCCL INFO ncclCommInitRank comm 0x55b02f9d8cd0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 commId 0xfd631f03428c6812 - Init START
vm:460:460 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'
vm:460:460 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 32, bw 60.000000/60.000000, type LOC/PIX, sameChannels 1
vm:460:460 [0] NCCL INFO Channel 00/64 : 0
vm:460:460 [0] NCCL INFO Channel 01/64 : 0
vm:460:460 [0] NCCL INFO comm 0x55b02f9d8cd0 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0
vm:460:460 [0] NCCL INFO ncclCommInitRank comm 0x55b02f9d8cd0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 commId 0xfd631f03428c6812 - Init COMPLETE
vm:460:460 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 1 total 0.39 (kernels 0.33, alloc 0.05, bootstrap 0.00, allgathers 0.00, topo 0.00, graphs 0.00, connections 0.01, rest 0.00)
)";

TEST(NcclLog, RecordedSingleRankNccl2289) {
  const FabricReport r = parse_nccl_log(kRecorded2289SingleRank);
  EXPECT_EQ(r.nccl_version, "2.28.9+cuda13.0");
  EXPECT_EQ(r.transport, "P2P/SHM only");
  EXPECT_FALSE(r.gpudirect_rdma.has_value());
  EXPECT_THAT(r.ib_devices, IsEmpty());
  EXPECT_EQ(r.channels_net, 0);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.ranks, 1);
  EXPECT_TRUE(r.init_complete);
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(NcclLog, RoceWithGpuDirectRdma) {
  const FabricReport r = parse_nccl_log(kRoceGdr);
  EXPECT_EQ(r.nccl_version, "2.27.3+cuda13.0");
  EXPECT_EQ(r.cuda_driver_version, 13000);
  EXPECT_EQ(r.transport, "RoCE");
  ASSERT_TRUE(r.gpudirect_rdma.has_value());
  EXPECT_TRUE(*r.gpudirect_rdma);
  EXPECT_THAT(r.devices, ElementsAre("mlx5_0:1/RoCE", "mlx5_1:1/RoCE"));
  EXPECT_EQ(r.channels_net, 4);
  EXPECT_EQ(r.channels_net_gdr, 4);
  EXPECT_EQ(r.channels_p2p, 0);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.ranks, 2);
  EXPECT_TRUE(r.init_complete);
  EXPECT_THAT(r.warnings, IsEmpty());
  const std::string text = fabric_summary_text(r);
  EXPECT_THAT(text, HasSubstr("NCCL 2.27.3+cuda13.0: RoCE (mlx5_0, mlx5_1), GPUDirect RDMA on"));
  EXPECT_THAT(text, Not(HasSubstr("warning")));
}

TEST(NcclLog, InfinibandWithoutGdrWarns) {
  const FabricReport r = parse_nccl_log(kIbNoGdr);
  EXPECT_EQ(r.nccl_version, "2.18.5+cuda12.2");
  EXPECT_EQ(r.transport, "IB");
  ASSERT_TRUE(r.gpudirect_rdma.has_value());
  EXPECT_FALSE(*r.gpudirect_rdma);
  EXPECT_THAT(r.devices, ElementsAre("mlx5_0:1/IB", "mlx5_1:1/IB"));
  EXPECT_EQ(r.channels_net, 5);
  EXPECT_EQ(r.channels_net_gdr, 0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("IB (mlx5_0, mlx5_1) runs without GPUDirect RDMA: every transfer is "
                                       "staged through host memory"));
  EXPECT_THAT(fabric_summary_text(r), HasSubstr("warning: IB (mlx5_0, mlx5_1) runs without GPUDirect RDMA"));
}

TEST(NcclLog, GdrDisabledWithoutChannelLines) {
  // Only INIT,NET: the HCA lines decide.
  const FabricReport r = parse_nccl_log(
      "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB bond0:10.10.10.10<0>\n"
      "h:1:2 [0] NCCL INFO Using network IB\n"
      "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n");
  EXPECT_EQ(r.transport, "RoCE");
  EXPECT_EQ(r.gpudirect_rdma, std::optional<bool>(false));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("RoCE (mlx5_0) runs without GPUDirect RDMA"));
}

TEST(NcclLog, GdrLevelZeroFromEnvironment) {
  const FabricReport r = parse_nccl_log(
      "h:1:2 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to 0\n"
      "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"
      "h:1:2 [0] NCCL INFO Using network IB\n"
      "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'\n");
  EXPECT_EQ(r.transport, "IB");
  EXPECT_EQ(r.gpudirect_rdma, std::optional<bool>(false));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("NCCL_NET_GDR_LEVEL"));
  EXPECT_THAT(r.settings, ElementsAre("NCCL_NET_GDR_LEVEL set by environment to 0"));
}

TEST(NcclLog, SocketFallbackWhileInfinibandExists) {
  const FabricReport r = parse_nccl_log(kSocketFallback);
  EXPECT_EQ(r.transport, "Socket");
  EXPECT_EQ(r.gpudirect_rdma, std::optional<bool>(false));
  EXPECT_THAT(r.devices, ElementsAre("eth0", "eth1"));
  EXPECT_THAT(r.ib_devices, ElementsAre("mlx5_0:1/IB"));
  EXPECT_EQ(r.channels_net, 4);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_THAT(r.warnings[0], HasSubstr("falls back to TCP sockets although IB devices exist (mlx5_0)"));
  EXPECT_THAT(r.warnings[0], HasSubstr("NCCL_IB_DISABLE=1"));
  EXPECT_THAT(r.warnings[1], HasSubstr("between nodes over TCP sockets (eth0, eth1)"));
}

TEST(NcclLog, SocketsWithoutRdmaDevicesWarnOnce) {
  std::string log = kSocketFallback;
  log.erase(log.find("host-a:900:930 [0] NCCL INFO NET/IB"),
            std::string("host-a:900:930 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.5<0>\n").size());
  const FabricReport r = parse_nccl_log(log);
  EXPECT_EQ(r.transport, "Socket");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("over TCP sockets"));
}

TEST(NcclLog, SingleNodePeerToPeerOnly) {
  const FabricReport r = parse_nccl_log(kSingleNodeP2p);
  EXPECT_EQ(r.transport, "P2P/SHM only");
  EXPECT_FALSE(r.gpudirect_rdma.has_value());
  EXPECT_THAT(r.devices, IsEmpty());
  EXPECT_EQ(r.channels_p2p, 4);
  EXPECT_EQ(r.channels_net, 0);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_THAT(fabric_summary_text(r), HasSubstr("P2P/SHM only"));
}

TEST(NcclLog, EmptyLogIsUnknown) {
  const FabricReport r = parse_nccl_log("");
  EXPECT_EQ(r.transport, "unknown");
  EXPECT_FALSE(r.gpudirect_rdma.has_value());
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(NcclLog, Json) {
  const nlohmann::json j = fabric_json(parse_nccl_log(kIbNoGdr));
  EXPECT_EQ(j["transport"], "IB");
  EXPECT_EQ(j["gpudirect_rdma"], false);
  EXPECT_EQ(j["channels"]["net"], 5);
  EXPECT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["warnings"].size(), 1u);
  EXPECT_TRUE(fabric_json(parse_nccl_log(kSingleNodeP2p))["gpudirect_rdma"].is_null());
}

TEST(NcclLog, ReadsEveryFileOfAFolder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("nccl_log_test_{}", ::getpid());
  fs::create_directories(dir);
  {
    std::string a = kRoceGdr;
    std::ofstream(dir / "rank-0.gpu-a.4101.log") << a.substr(0, a.size() / 2);
    std::ofstream(dir / "rank-1.gpu-b.4102.log") << a.substr(a.find('\n', a.size() / 2) + 1);
  }
  const FabricReport r = read_nccl_logs(dir.string());
  fs::remove_all(dir);
  EXPECT_EQ(r.transport, "RoCE");
  EXPECT_EQ(r.gpudirect_rdma, std::optional<bool>(true));
  EXPECT_EQ(read_nccl_logs((dir / "missing").string()).transport, "unknown");
}

TEST(NcclLog, DebugEnvironment) {
  ::unsetenv("NCCL_DEBUG");
  ::unsetenv("NCCL_DEBUG_FILE");
  ::setenv("NCCL_DEBUG_SUBSYS", "ALL", 1);
  const auto env = nccl_debug_environment("/run/x/nccl", 3);
  ::unsetenv("NCCL_DEBUG_SUBSYS");
  ASSERT_EQ(env.size(), 3u);
  EXPECT_EQ(env[0].second, "INFO");
  EXPECT_EQ(env[1].second, "ALL");  // the user's choice wins
  EXPECT_EQ(env[2].second, "/run/x/nccl/rank-3.%h.%p.log");
}

}  // namespace
