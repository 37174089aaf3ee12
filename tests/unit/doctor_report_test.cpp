// What rank 0 makes of every rank's report: nodes grouped by host, a node
// whose fabric differs from the others named, the JSON that crosses MPI read
// back the same; and the parsers the probes use.
#include "runtime/doctor/doctor.h"
#include "runtime/doctor/open_mpi_params.h"
#include "tests/unit/doctor_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain::doctor {
namespace {

using ::testing::HasSubstr;

NodeReport report(const std::string& host, int rank, const std::string& ports, const std::string& gid) {
  NodeReport r;
  r.host = host;
  r.rank = rank;
  r.add("rdma", Verdict::ok, ports + ": ACTIVE");
  r.fingerprint["rdma.active_ports"] = ports;
  r.fingerprint["rdma.gid_index.mlx5_0:1"] = gid;
  r.recommend("NCCL_IB_GID_INDEX", gid);
  return r;
}

TEST(DoctorReport, RanksOfAHostAreOneNode) {
  const auto c = combine({report("a", 0, "mlx5_0:1", "3"), report("a", 1, "mlx5_0:1", "3"),
                          report("b", 2, "mlx5_0:1", "3"), report("b", 3, "mlx5_0:1", "3")});
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[1].host, "b");
  EXPECT_EQ(c.nodes[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_TRUE(c.across.empty());
  EXPECT_EQ(summary_line(c), "2 nodes, 4 ranks: 0 fail, 0 warn");
  EXPECT_THAT(render_text(c), HasSubstr("node a (ranks 0-1)"));
  EXPECT_THAT(render_text(c), HasSubstr("export NCCL_IB_GID_INDEX=3"));
}

TEST(DoctorReport, TheOddNodeOutIsNamed) {
  const auto c = combine({report("a", 0, "mlx5_0:1", "3"), report("b", 1, "", "3"), report("c", 2, "mlx5_0:1", "3")});
  ASSERT_EQ(c.across.size(), 1u);
  EXPECT_EQ(c.across[0].verdict, Verdict::fail);
  EXPECT_THAT(c.across[0].detail, HasSubstr("rdma.active_ports differs across nodes"));
  EXPECT_THAT(c.across[0].detail, HasSubstr("\"(none)\" on b"));
  EXPECT_EQ(c.across[0].advice, "check the odd node(s) out: b");
  EXPECT_EQ(c.worst(), Verdict::fail);
  EXPECT_THAT(summary_line(c), HasSubstr("1 fail"));
}

TEST(DoctorReport, TwoNodesThatDisagreeAreBothNamed) {
  const auto c = combine({report("a", 0, "mlx5_0:1", "3"), report("b", 1, "mlx5_0:1", "1")});
  ASSERT_EQ(c.across.size(), 1u);
  EXPECT_THAT(c.across[0].detail, HasSubstr("\"1\" on b; \"3\" on a"));
  EXPECT_EQ(c.across[0].advice, "the nodes disagree: check each one");
}

TEST(DoctorReport, JsonRoundTripKeepsEverything) {
  NodeReport r = report("a", 5, "mlx5_0:1", "3");
  r.add("gpudirect", Verdict::fail, "none", "modprobe");
  r.facts["x"] = {{"y", 1}};
  const NodeReport back = node_report_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.host, "a");
  EXPECT_EQ(back.rank, 5);
  ASSERT_EQ(back.findings.size(), 2u);
  EXPECT_EQ(back.findings[1].verdict, Verdict::fail);
  EXPECT_EQ(back.findings[1].advice, "modprobe");
  EXPECT_EQ(back.environment, r.environment);
  EXPECT_EQ(back.fingerprint, r.fingerprint);
  EXPECT_EQ(back.facts, r.facts);
}

TEST(DoctorReport, McaListsIncludeOrExclude) {
  EXPECT_TRUE(mca_list_excludes("^ucx", "ucx"));
  EXPECT_TRUE(mca_list_excludes("^ofi, ucx", "ucx"));
  EXPECT_FALSE(mca_list_excludes("^ofi", "ucx"));
  EXPECT_TRUE(mca_list_excludes("ob1", "ucx"));
  EXPECT_FALSE(mca_list_excludes("ucx,ob1", "ucx"));
  EXPECT_FALSE(mca_list_excludes("", "ucx"));
}

TEST(DoctorReport, OpenMpiParamsComeFromEnvThenHomeThenSystem) {
  testing::FixtureRoot f;
  f.write("/etc/openmpi/openmpi-mca-params.conf", "pml = ^ucx\npml = ^ucx,ofi  # the last wins\n");
  auto p = open_mpi_param(SysRoot(f.path()), {}, "pml");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->value, "^ucx,ofi");
  EXPECT_EQ(p->source, "/etc/openmpi/openmpi-mca-params.conf");
  f.write("/home/u/.openmpi/mca-params.conf", "pml=ob1\n");
  p = open_mpi_param(SysRoot(f.path()), {{"HOME", "/home/u"}}, "pml");
  EXPECT_EQ(p->value, "ob1");
  p = open_mpi_param(SysRoot(f.path()), {{"HOME", "/home/u"}, {"OMPI_MCA_pml", "ucx"}}, "pml");
  EXPECT_EQ(p->value, "ucx");
  EXPECT_EQ(p->source, "OMPI_MCA_pml");
  EXPECT_FALSE(open_mpi_param(SysRoot(f.path()), {}, "btl").has_value());
  f.write("/bundle/etc/openmpi/openmpi-mca-params.conf", "btl = ^openib\n");
  p = open_mpi_param(SysRoot(f.path()), {{"OPAL_SYSCONFDIR", "/bundle/etc/openmpi"}}, "btl");
  ASSERT_TRUE(p.has_value()) << "a relocated Open MPI reads its own folder";
  EXPECT_EQ(p->source, "/bundle/etc/openmpi/openmpi-mca-params.conf");
}

TEST(DoctorReport, UcxInfoDevicesAreParsed) {
  const std::string out =
      "#\n# Memory domain: rxe0\n#     Component: ib\n#\n#      Transport: rc_verbs\n#         Device: rxe0:1\n"
      "#           Type: network\n#\n#      Transport: ud_verbs\n#         Device: rxe0:1\n"
      "#\n#      Transport: tcp\n#         Device: ens3\n";
  const auto d = parse_ucx_devices(out);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], std::make_pair(std::string("rc_verbs"), std::string("rxe0:1")));
  EXPECT_EQ(d[2], std::make_pair(std::string("tcp"), std::string("ens3")));
}

}  // namespace
}  // namespace shardtrain::doctor
