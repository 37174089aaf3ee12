// The doctor's RDMA checks on fixture nodes: RoCE v1 and v2 GIDs over IPv4
// and IPv6, InfiniBand, a port that is down, Soft-RoCE, no RDMA at all, and
// the job's own NCCL and UCX settings against what is there.
#include "runtime/doctor/doctor.h"
#include "runtime/doctor/rdma_ports.h"
#include "tests/unit/doctor_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain::doctor {
namespace {

using testing::FixtureRoot;
using testing::Gid;
using ::testing::HasSubstr;
using testing::ipv4_gids;

constexpr const char* kNicPath = "pci0000:00/0000:00:02.0/0000:01:00.0";

NodeReport probe(const FixtureRoot& f, const Environment& env = {}) {
  ProbeOptions o;
  o.sysroot = f.path();
  return probe_node(o, env, 0);
}

std::vector<Finding> findings(const NodeReport& r, const std::string& check) {
  std::vector<Finding> out;
  for (const auto& f : r.findings)
    if (f.check == check) out.push_back(f);
  return out;
}

std::string env_value(const NodeReport& r, const std::string& name) {
  for (const auto& [n, v] : r.environment)
    if (n == name) return v;
  return "<unset>";
}

TEST(DoctorRdma, RoceV2OverIpv4IsTheEntryCarryingTheAddress) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens1f0"));
  f.netdev("ens1f0", 9000);
  const SysRoot sys(f.path());
  const auto devices = scan_rdma_devices(sys);
  ASSERT_EQ(devices.size(), 1u);
  ASSERT_EQ(devices[0].ports.size(), 1u);
  const RdmaPort& p = devices[0].ports[0];
  EXPECT_EQ(p.gids.size(), 4u) << "unused (all-zero) entries are left out";
  EXPECT_EQ(p.netdev, "ens1f0");
  EXPECT_EQ(p.roce_active_mtu(), 4096);
  EXPECT_EQ(devices[0].pci_path, std::string("/sys/devices/") + kNicPath);
  const auto gid = routable_roce_v2_gid(p);
  ASSERT_TRUE(gid.has_value());
  EXPECT_EQ(gid->index, 3);
  EXPECT_EQ(gid->address(), "10.0.0.1");

  const NodeReport r = probe(f);
  EXPECT_EQ(r.worst(), Verdict::ok);
  EXPECT_EQ(env_value(r, "NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(env_value(r, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(env_value(r, "UCX_NET_DEVICES"), "mlx5_0:1");
  EXPECT_EQ(env_value(r, "NCCL_SOCKET_IFNAME"), "ens1f0");
  EXPECT_EQ(r.fingerprint.at("rdma.gid_index.mlx5_0:1"), "3");
}

TEST(DoctorRdma, RoceV2OverIpv6SkipsLinkLocal) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet",
         {{"fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1", "ens1f0"},
          {"fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2", "ens1f0"},
          {"fd00:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", "ens1f0"},
          {"fd00:0000:0000:0000:0000:0000:0000:0001", "RoCE v2", "ens1f0"}});
  f.netdev("ens1f0", 9000);
  const NodeReport r = probe(f);
  EXPECT_EQ(env_value(r, "NCCL_IB_GID_INDEX"), "3");
  const auto gid = findings(r, "roce-gid");
  ASSERT_EQ(gid.size(), 1u);
  EXPECT_THAT(gid[0].detail, HasSubstr("fd00::1"));
}

TEST(DoctorRdma, OnlyRoceV1EntriesFail) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet",
         {{"fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1", "ens1f0"},
          {"0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1", "ens1f0"}});
  f.netdev("ens1f0", 9000);
  const NodeReport r = probe(f);
  const auto gid = findings(r, "roce-gid");
  ASSERT_EQ(gid.size(), 1u);
  EXPECT_EQ(gid[0].verdict, Verdict::fail);
  EXPECT_THAT(gid[0].detail, HasSubstr("only RoCE v1"));
  EXPECT_EQ(env_value(r, "NCCL_IB_GID_INDEX"), "<unset>");
}

TEST(DoctorRdma, StandardMtuWarnsAboutRoceMtu1024) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens1f0"));
  f.netdev("ens1f0", 1500);
  const auto mtu = findings(probe(f), "roce-mtu");
  ASSERT_EQ(mtu.size(), 1u);
  EXPECT_EQ(mtu[0].verdict, Verdict::warn);
  EXPECT_THAT(mtu[0].detail, HasSubstr("MTU 1024"));
  EXPECT_EQ(roce_mtu_for_interface_mtu(1500), 1024);
  EXPECT_EQ(roce_mtu_for_interface_mtu(4200), 4096);
  EXPECT_EQ(roce_mtu_for_interface_mtu(2200), 2048);
}

TEST(DoctorRdma, InfinibandNeedsNoGidIndex) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand", {{"fe80:0000:0000:0000:0002:c903:0043:f6a1", "", ""}},
         "200 Gb/sec (4X HDR)");
  const NodeReport r = probe(f);
  EXPECT_EQ(r.worst(), Verdict::ok);
  const auto rdma = findings(r, "rdma");
  ASSERT_EQ(rdma.size(), 1u);
  EXPECT_THAT(rdma[0].detail, HasSubstr("InfiniBand, 200 Gb/sec"));
  EXPECT_EQ(env_value(r, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(env_value(r, "NCCL_IB_GID_INDEX"), "<unset>");
  EXPECT_EQ(env_value(r, "NCCL_SOCKET_IFNAME"), "eth0") << "the default route's interface";
}

TEST(DoctorRdma, DownPortFailsWhenItIsTheOnlyOneAndWarnsBesideAnActiveOne) {
  FixtureRoot only;
  only.rdma_device("mlx5_0", kNicPath, 0);
  only.port("mlx5_0", 1, "1: DOWN", "Ethernet", ipv4_gids("ens1f0"));
  NodeReport r = probe(only);
  EXPECT_EQ(r.worst(), Verdict::fail);
  EXPECT_EQ(env_value(r, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(r.fingerprint.at("rdma.active_ports"), "");

  FixtureRoot two;
  two.rdma_device("mlx5_0", kNicPath, 0);
  two.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens1f0"));
  two.netdev("ens1f0", 9000);
  two.rdma_device("mlx5_1", "pci0000:00/0000:00:03.0/0000:02:00.0", 0);
  two.port("mlx5_1", 1, "1: DOWN", "Ethernet", ipv4_gids("ens2f0", "0a00:0101"));
  r = probe(two);
  EXPECT_EQ(r.worst(), Verdict::warn);
  bool named = false;
  for (const auto& f : findings(r, "rdma"))
    named = named || (f.verdict == Verdict::warn && f.detail == "mlx5_1:1 is not ACTIVE");
  EXPECT_TRUE(named);
  EXPECT_EQ(env_value(r, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(r.fingerprint.at("rdma.active_ports"), "mlx5_0:1");
}

TEST(DoctorRdma, NoRdmaAtAllIsATcpNode) {
  FixtureRoot f;
  const NodeReport r = probe(f);
  EXPECT_EQ(r.worst(), Verdict::ok);
  const auto rdma = findings(r, "rdma");
  ASSERT_EQ(rdma.size(), 1u);
  EXPECT_THAT(rdma[0].detail, HasSubstr("no RDMA devices"));
  EXPECT_EQ(env_value(r, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(env_value(r, "NCCL_SOCKET_IFNAME"), "eth0");
}

TEST(DoctorRdma, SoftRoceIsSoftwareOnItsParentInterface) {
  FixtureRoot f;
  f.rdma_device("rxe0", "", -1, "ens3");
  f.port("rxe0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens3", "0a0b:0001"), "");
  f.netdev("ens3", 1500);
  const auto devices = scan_rdma_devices(SysRoot(f.path()));
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_TRUE(devices[0].software);
  EXPECT_TRUE(devices[0].pci_path.empty());
  const NodeReport r = probe(f);
  EXPECT_EQ(env_value(r, "NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(env_value(r, "UCX_NET_DEVICES"), "rxe0:1");
  EXPECT_EQ(env_value(r, "UCX_UD_VERBS_ETH_DGID_CHECK"), "n");
  EXPECT_THAT(findings(r, "roce-gid")[0].detail, HasSubstr("10.11.0.1 on ens3"));
}

TEST(DoctorRdma, JobSettingsThatContradictTheNodeFail) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens1f0"));
  f.netdev("ens1f0", 9000);
  const NodeReport r = probe(f, {{"NCCL_IB_GID_INDEX", "0"},
                                 {"NCCL_IB_HCA", "mlx5_9"},
                                 {"UCX_NET_DEVICES", "mlx5_3:1"},
                                 {"NCCL_SOCKET_IFNAME", "ib"}});
  std::string all;
  for (const auto& f2 : r.findings)
    if (f2.verdict == Verdict::fail) all += f2.detail + "\n";
  EXPECT_THAT(all, HasSubstr("NCCL_IB_GID_INDEX=0 is not the RoCE v2 entry"));
  EXPECT_THAT(all, HasSubstr("NCCL_IB_HCA=mlx5_9 names mlx5_9"));
  EXPECT_THAT(all, HasSubstr("UCX_NET_DEVICES=mlx5_3:1 names mlx5_3"));
  EXPECT_THAT(all, HasSubstr("NCCL_SOCKET_IFNAME=ib matches no interface"));
}

TEST(DoctorRdma, OpenMpiExcludingUcxWarnsWhereRdmaIsUp) {
  FixtureRoot f;
  f.rdma_device("mlx5_0", kNicPath, 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens1f0"));
  f.netdev("ens1f0", 9000);
  f.write("/etc/openmpi/openmpi-mca-params.conf", "# Debian's\nbtl = ^openib\npml = ^ucx\n");
  NodeReport r = probe(f);
  auto t = findings(r, "mpi-transport");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].verdict, Verdict::warn);
  EXPECT_THAT(t[0].detail, HasSubstr("pml = ^ucx (/etc/openmpi/openmpi-mca-params.conf)"));
  EXPECT_EQ(env_value(r, "OMPI_MCA_pml"), "ucx");

  r = probe(f, {{"OMPI_MCA_pml", "ucx"}});  // mpirun --mca pml ucx
  t = findings(r, "mpi-transport");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].verdict, Verdict::ok);
}

}  // namespace
}  // namespace shardtrain::doctor
