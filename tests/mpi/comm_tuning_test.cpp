// comm.tuning under mpirun with 1-4 ranks: a tuning file measured on this
// topology decides the world communicator's algorithm per collective and
// size (where it measured one), a file of another topology is an error on
// every rank, and "auto" follows the cache of this topology when there is
// one; without one, a world over several (emulated) nodes probes its
// algorithms at start and caches them, and one on a single node keeps the
// thresholds.
#include "tests/mpi/comm_test_util.h"

#include "runtime/comm/engine/algorithm_probe.h"
#include "runtime/comm/engine/mpi_communicator.h"
#include "runtime/comm/engine/tuning.h"

#include <cstdlib>
#include <filesystem>

namespace shardtrain::comm::testing {
namespace {

CommOptions with_tuning(const std::string& tuning) {
  CommOptions o;
  o.tuning = tuning;
  o.timeout_s = 60;
  return o;
}

TopologyFingerprint here() { return MpiCommunicator::make_world(with_tuning("off"))->fingerprint(); }

// A directory every rank sees (rank 0 makes it, its path goes to all).
std::string shared_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/shardtrain-tuning-test-" + name;
  if (world_rank() == 0) std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

std::string algorithm_of(Communicator& c, int64_t bytes) {
  Tensor t = Tensor::zeros({bytes / 4});
  WorkPtr w = c.allreduce(t, ReduceOp::sum);
  w->wait();
  return w->algorithm();
}

}  // namespace

TEST(CommTuning, TheFileDecidesTheAlgorithmWhereItMeasuredOne) {
  const TopologyFingerprint fp = here();
  const std::string path = shared_dir("decides") + "/ring.json";
  if (world_rank() == 0) {
    Tuning t(fp);
    t.add("allreduce", {4 << 10, "ring", 1e-5});  // where the thresholds pick shm, oneshot or mpi
    t.add("allreduce", {64 << 20, "mpi", 1e-1});  // where they pick the ring
    t.save(path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto tuned = MpiCommunicator::make_world(with_tuning(path));
  EXPECT_NE(tuned->algorithm_choice().find("from " + path), std::string::npos) << tuned->algorithm_choice();
  if (world_size() == 1) {
    EXPECT_EQ(algorithm_of(*tuned, 16 << 10), "local");
    return;
  }
  EXPECT_EQ(algorithm_of(*tuned, 16 << 10), "ring");
  EXPECT_EQ(algorithm_of(*tuned, 32 << 20), "mpi");
  // Forced wins over the file.
  CommOptions forced = with_tuning(path);
  forced.allreduce_algorithm = AllreduceAlgorithm::oneshot;
  EXPECT_EQ(algorithm_of(*MpiCommunicator::make_world(forced), 16 << 10), "oneshot");
}

TEST(CommTuning, AFileOfAnotherTopologyIsAnErrorOnEveryRank) {
  TopologyFingerprint other = here();
  other.ranks += 1;
  const std::string path = shared_dir("other") + "/other.json";
  if (world_rank() == 0) Tuning(other).save(path);
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    MpiCommunicator::make_world(with_tuning(path));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was measured on topology " + other.key()), std::string::npos) << e.what();
  }
}

TEST(CommTuning, AutoFollowsTheCacheOfThisTopology) {
  const std::string cache = shared_dir("cache");
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const TopologyFingerprint fp = here();
  std::filesystem::remove(cached_tuning_path(fp));
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_NE(MpiCommunicator::make_world(with_tuning("auto"))->algorithm_choice().find("no tuning file"),
            std::string::npos);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    Tuning t(fp);
    t.add("allreduce", {1 << 20, "ring", 1e-4});
    t.save(cached_tuning_path(fp));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto tuned = MpiCommunicator::make_world(with_tuning("auto"));
  EXPECT_NE(tuned->algorithm_choice().find(cached_tuning_path(fp)), std::string::npos) << tuned->algorithm_choice();
  if (world_size() > 1) {
    EXPECT_EQ(algorithm_of(*tuned, 16 << 10), "ring");
  }
  unsetenv("XDG_CACHE_HOME");
}

TEST(CommTuning, AcrossNodesWithoutAFileAJobProbesAndCachesWhatItMeasured) {
  if (world_size() == 1) GTEST_SKIP() << "nothing to probe on one rank";
  const std::string cache = shared_dir("probe");
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  CommOptions o = with_tuning("auto");
  o.ranks_per_node = 1;  // every rank its own emulated node
  o.probe_budget_s = 0.3;
  CommOptions off = o;
  off.tuning = "off";
  const std::string path = cached_tuning_path(MpiCommunicator::make_world(off)->fingerprint());
  if (world_rank() == 0) std::filesystem::remove(path);  // an earlier run's
  MPI_Barrier(MPI_COMM_WORLD);
  {
    auto first = MpiCommunicator::make_world(o);
    const std::string how = first->algorithm_choice();
    EXPECT_NE(how.find("probed at job start"), std::string::npos) << how;
    EXPECT_NE(how.find("cached in " + path), std::string::npos) << how;
    // Collectives after the probes: right, and on a measured algorithm.
    Tensor t = Tensor::empty({1000});
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = float(world_rank() + i % 7);
    first->allreduce(t, ReduceOp::sum)->wait();
    const int p = world_size();
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.f32()[i], float(p * (p - 1) / 2 + p * (i % 7))) << i;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Tuning cached = Tuning::load(path);
  EXPECT_EQ(cached.choices().size(), 3U);  // all-reduce, reduce-scatter, all-gather
  // The budget always covers the first size; how many more it covers
  // depends on the machine (under ASan on 4 oversubscribed ranks, one).
  EXPECT_GE(cached.applies_up_to(), kProbeFirstBytes);
  EXPECT_NE(cached.choose("allreduce", cached.applies_up_to() + 1), "oneshot");  // above: extrapolated
  EXPECT_NE(cached.choose("allreduce", cached.applies_up_to() + 1), "");
  // The next job of this topology follows the cache; "probe" probes anew and writes nothing.
  const std::string again = MpiCommunicator::make_world(o)->algorithm_choice();
  EXPECT_NE(again.find("probed at an earlier job start"), std::string::npos) << again;
  EXPECT_NE(again.find("from " + path), std::string::npos) << again;
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(path);
  MPI_Barrier(MPI_COMM_WORLD);
  o.tuning = "probe";
  EXPECT_NE(MpiCommunicator::make_world(o)->algorithm_choice().find("not cached"), std::string::npos);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(std::filesystem::exists(path));
  // On one node, and with probes off, the thresholds.
  o.tuning = "auto";
  o.probe_budget_s = 0;
  EXPECT_NE(MpiCommunicator::make_world(o)->algorithm_choice().find("no tuning file"), std::string::npos);
  o.probe_budget_s = 0.3;
  o.ranks_per_node = 0;
  EXPECT_NE(MpiCommunicator::make_world(o)->algorithm_choice().find("no tuning file"), std::string::npos);
  unsetenv("XDG_CACHE_HOME");
}

}  // namespace shardtrain::comm::testing
