// The doctor's GPU checks on fixture nodes: which NIC is nearest each GPU on
// the PCIe tree (same switch, host bridge, other NUMA node), and whether
// GPUDirect RDMA can work (nvidia_peermem, DMA-BUF, neither).
#include "runtime/doctor/doctor.h"
#include "runtime/doctor/pci_affinity.h"
#include "tests/unit/doctor_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain::doctor {
namespace {

using testing::FixtureRoot;
using ::testing::HasSubstr;
using testing::ipv4_gids;

// Socket 0: a PCIe switch under root port 00:01.0 with the GPU and NIC 0;
// socket 1 (host bridge pci0000:80): NIC 1.
constexpr const char* kGpu = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0";
constexpr const char* kNicSameSwitch = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0";
constexpr const char* kNicHostBridge = "pci0000:00/0000:00:03.0/0000:05:00.0";
constexpr const char* kNicOtherSocket = "pci0000:80/0000:80:01.0/0000:81:00.0";

NodeReport probe(const FixtureRoot& f) {
  ProbeOptions o;
  o.sysroot = f.path();
  return probe_node(o, {}, 0);
}

const Finding* find(const NodeReport& r, const std::string& check) {
  for (const auto& f : r.findings)
    if (f.check == check) return &f;
  return nullptr;
}

void nic(const FixtureRoot& f, const std::string& name, const std::string& path, int numa) {
  f.rdma_device(name, path, numa);
  f.port(name, 1, "4: ACTIVE", "Ethernet", ipv4_gids(name + "-if"));
  f.netdev(name + "-if", 9000);
}

TEST(DoctorGpu, PciDistanceFollowsTheTree) {
  const std::string d = "/sys/devices/";
  EXPECT_EQ(pci_distance(d + kGpu, 0, d + kNicSameSwitch, 0), PciDistance::same_switch);
  EXPECT_EQ(pci_distance(d + kGpu, 0, d + kNicHostBridge, 0), PciDistance::host_bridge);
  EXPECT_EQ(pci_distance(d + kGpu, 0, d + kNicOtherSocket, 1), PciDistance::cross_numa);
  EXPECT_EQ(pci_distance(d + kGpu, 0, d + kNicOtherSocket, 0), PciDistance::same_numa);
  EXPECT_EQ(pci_distance(d + kGpu, -1, d + kNicOtherSocket, -1), PciDistance::other_host_bridge);
  EXPECT_EQ(pci_distance(d + kGpu, 0, "", -1), PciDistance::unknown);
}

TEST(DoctorGpu, GpusAreFoundOnThePciBus) {
  FixtureRoot f;
  f.gpu(kGpu, 0);
  f.pci_function("pci0000:00/0000:00:1f.0", "0x8086", "0x060100", 0);  // not a GPU
  const auto gpus = scan_nvidia_gpus(SysRoot(f.path()));
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].address, "0000:03:00.0");
  EXPECT_EQ(gpus[0].numa_node, 0);
  EXPECT_EQ(gpus[0].pci_path, std::string("/sys/devices/") + kGpu);
}

TEST(DoctorGpu, NicUnderTheSameSwitchIsChosen) {
  FixtureRoot f;
  f.gpu(kGpu, 0);
  nic(f, "mlx5_1", kNicOtherSocket, 1);
  nic(f, "mlx5_0", kNicSameSwitch, 0);
  f.write("/sys/module/nvidia_peermem/refcnt", "0\n");
  const NodeReport r = probe(f);
  const Finding* a = find(r, "gpu-nic");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->verdict, Verdict::ok);
  EXPECT_THAT(a->detail, HasSubstr("-> mlx5_0: PIX/PXB"));
  const Finding* g = find(r, "gpudirect");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::ok);
  EXPECT_THAT(g->detail, HasSubstr("nvidia_peermem"));
  EXPECT_EQ(r.fingerprint.at("gpus"), "1");
}

TEST(DoctorGpu, NicsBeyondTheGpusSwitchWarn) {
  const struct {
    const char* nic_path;
    int nic_numa;
    const char* distance;
  } cases[] = {{kNicOtherSocket, 1, "SYS (across the CPU interconnect)"},
               {kNicHostBridge, 0, "PHB (through the CPU's host bridge)"}};
  for (const auto& c : cases) {
    FixtureRoot f;
    f.gpu(kGpu, 0);
    nic(f, "mlx5_0", c.nic_path, c.nic_numa);
    const NodeReport r = probe(f);
    const Finding* a = find(r, "gpu-nic");
    ASSERT_NE(a, nullptr) << c.distance;
    EXPECT_EQ(a->verdict, Verdict::warn) << c.distance;
    EXPECT_THAT(a->detail, HasSubstr(c.distance));
    EXPECT_THAT(a->advice, HasSubstr("NCCL_NET_GDR_LEVEL"));
  }
}

TEST(DoctorGpu, GpuDirectNeedsPeermemOrDmabuf) {
  FixtureRoot f;
  f.gpu(kGpu, 0);
  nic(f, "mlx5_0", kNicSameSwitch, 0);
  f.write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14\n");
  const NodeReport without = probe(f);
  const Finding* none = find(without, "gpudirect");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->verdict, Verdict::fail);
  EXPECT_THAT(none->advice, HasSubstr("modprobe nvidia-peermem"));

  f.write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14\n");
  NodeReport r = probe(f);
  const Finding* dmabuf = find(r, "gpudirect");
  ASSERT_NE(dmabuf, nullptr);
  EXPECT_EQ(dmabuf->verdict, Verdict::ok);
  EXPECT_THAT(dmabuf->detail, HasSubstr("DMA-BUF"));
  EXPECT_EQ(r.fingerprint.at("gpudirect"), "dmabuf");

  f.write("/proc/sys/kernel/osrelease", "5.4.0-150-generic\n");  // DMA-BUF needs 5.12
  r = probe(f);
  ASSERT_NE(find(r, "gpudirect"), nullptr);
  EXPECT_EQ(find(r, "gpudirect")->verdict, Verdict::fail);
}

TEST(DoctorGpu, CpuNodeHasNoGpuFindingsBeyondSayingSo) {
  FixtureRoot f;
  nic(f, "mlx5_0", kNicHostBridge, 0);
  const NodeReport r = probe(f);
  EXPECT_EQ(find(r, "gpu-nic"), nullptr);
  EXPECT_EQ(find(r, "gpudirect"), nullptr);
  EXPECT_THAT(find(r, "gpus")->detail, HasSubstr("no NVIDIA GPU"));
}

}  // namespace
}  // namespace shardtrain::doctor
