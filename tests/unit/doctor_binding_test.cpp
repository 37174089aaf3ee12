// Where `shardrun --bind auto` puts each rank, on fixture nodes: a GPU per
// node-local rank with the NIC under its PCIe switch and its NUMA node's
// cores; CPU ranks in blocks per NUMA node; the launcher's local rank read
// from Open MPI's, Slurm's or MPICH's environment; and the pinning itself.
#include "runtime/doctor/rank_binding.h"
#include "tests/unit/doctor_fixture.h"

#include <gtest/gtest.h>

#include <sched.h>

namespace shardtrain::doctor {
namespace {

using testing::FixtureRoot;
using testing::ipv4_gids;

// Two sockets, each with a PCIe switch holding one GPU and one NIC.
void two_socket_gpu_node(const FixtureRoot& f) {
  f.write("/sys/devices/system/node/node0/cpulist", "0-15\n");
  f.write("/sys/devices/system/node/node1/cpulist", "16-31\n");
  f.gpu("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0);
  f.gpu("pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0", 1);
  f.rdma_device("mlx5_0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens1"));
  f.rdma_device("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0", 1);
  f.port("mlx5_1", 1, "4: ACTIVE", "Ethernet", ipv4_gids("ens2", "0a00:0002"));
}

TEST(DoctorBinding, EachGpuRankGetsItsSwitchNicAndNumaCores) {
  FixtureRoot f;
  two_socket_gpu_node(f);
  const SysRoot sys(f.path());
  const RankBinding r0 = plan_binding(sys, {}, 0, 4);
  EXPECT_EQ(r0.gpu, "0000:03:00.0");
  EXPECT_EQ(r0.nic, "mlx5_0:1");
  EXPECT_EQ(r0.numa_node, 0);
  EXPECT_EQ(r0.cpus, "0-15");
  const RankBinding r1 = plan_binding(sys, {}, 1, 4);
  EXPECT_EQ(r1.gpu, "0000:83:00.0");
  EXPECT_EQ(r1.nic, "mlx5_1:1");
  EXPECT_EQ(r1.cpus, "16-31");
  EXPECT_EQ(plan_binding(sys, {}, 2, 4).gpu, r0.gpu) << "more ranks than GPUs wrap around, as CUDA's index does";
  EXPECT_EQ(r1.describe(), "local rank 1/4, GPU 0000:83:00.0, NUMA node 1, cpus 16-31, NIC mlx5_1:1");
}

TEST(DoctorBinding, CudaVisibleDevicesLeavesTheGpuToTheJob) {
  FixtureRoot f;
  two_socket_gpu_node(f);
  const RankBinding b = plan_binding(SysRoot(f.path()), {{"CUDA_VISIBLE_DEVICES", "1"}}, 0, 1);
  EXPECT_TRUE(b.gpu.empty());
  EXPECT_NE(b.note.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
}

TEST(DoctorBinding, CpuRanksFillNumaNodesInBlocks) {
  FixtureRoot f;
  f.write("/sys/devices/system/node/node0/cpulist", "0-7\n");
  f.write("/sys/devices/system/node/node1/cpulist", "8-15\n");
  f.write("/sys/devices/system/node/possible", "0-1\n");  // not a node
  f.rdma_device("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  f.port("mlx5_1", 1, "4: ACTIVE", "InfiniBand", {});
  f.rdma_device("mlx5_0", "pci0000:00/0000:00:01.0/0000:01:00.0", 0);
  f.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand", {});
  const SysRoot sys(f.path());
  std::vector<std::string> cpus, nics;
  for (int r = 0; r < 4; ++r) {
    const RankBinding b = plan_binding(sys, {}, r, 4);
    cpus.push_back(b.cpus);
    nics.push_back(b.nic);
  }
  EXPECT_EQ(cpus, (std::vector<std::string>{"0-7", "0-7", "8-15", "8-15"}));
  EXPECT_EQ(nics, (std::vector<std::string>{"mlx5_0:1", "mlx5_0:1", "mlx5_1:1", "mlx5_1:1"}));
}

TEST(DoctorBinding, OneNumaNodeLeavesTheAffinityAlone) {
  FixtureRoot f;
  f.write("/sys/devices/system/node/node0/cpulist", "0-1\n");
  const RankBinding b = plan_binding(SysRoot(f.path()), {}, 1, 2);
  EXPECT_TRUE(b.cpus.empty());
  EXPECT_TRUE(b.nic.empty());
  EXPECT_EQ(b.describe(), "local rank 1/2, cpus unbound, no RDMA port");
}

TEST(DoctorBinding, LocalRankComesFromTheLauncher) {
  EXPECT_EQ(launcher_local_rank({}), std::make_pair(-1, 0));
  EXPECT_EQ(launcher_local_rank({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}),
            std::make_pair(3, 8));
  EXPECT_EQ(launcher_local_rank({{"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2),3"}}), std::make_pair(1, 4));
  EXPECT_EQ(launcher_local_rank({{"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}}), std::make_pair(0, 2));
  EXPECT_EQ(launcher_local_rank({{"SLURM_LOCALID", "x"}}), std::make_pair(-1, 0));
}

TEST(DoctorBinding, ApplyPinsTheProcessAndKeepsTheJobsSettings) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  ::setenv("NCCL_IB_HCA", "=mine:1", 1);
  ::unsetenv("UCX_NET_DEVICES");
  RankBinding b;
  b.cpus = "0";
  b.nic = "mlx5_0:1";
  apply_binding(b);
  EXPECT_EQ(current_cpus(), "0");
  EXPECT_STREQ(std::getenv("NCCL_IB_HCA"), "=mine:1") << "what the job set stays";
  EXPECT_STREQ(std::getenv("UCX_NET_DEVICES"), "mlx5_0:1");
  EXPECT_STREQ(std::getenv("SHARDTRAIN_BINDING"), b.describe().c_str());

  // Cpus outside those the process may use (a scheduler's cgroup): left alone, and said.
  b.cpus = "100000-100001";
  apply_binding(b);
  EXPECT_EQ(current_cpus(), "0");
  EXPECT_NE(std::string(std::getenv("SHARDTRAIN_BINDING")).find("cpus 100000-100001 are outside the 0 this process"),
            std::string::npos)
      << std::getenv("SHARDTRAIN_BINDING");
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);
  ::unsetenv("NCCL_IB_HCA");
  ::unsetenv("UCX_NET_DEVICES");
  ::unsetenv("SHARDTRAIN_BINDING");
}

}  // namespace
}  // namespace shardtrain::doctor
