// comm.tuning under mpirun with 1-4 ranks: a tuning file measured on this
// topology decides the world communicator's algorithm per collective and
// size (where it measured one), a file of another topology is an error on
// every rank, and "auto" follows the cache of this topology when there is
// one.
#include "tests/mpi/comm_test_util.h"

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

}  // namespace shardtrain::comm::testing
