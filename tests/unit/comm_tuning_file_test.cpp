// The tuning file of measured algorithms: the choice for a size is the one
// measured at the nearest size by ratio; a file round-trips; a file that is
// not one is an error naming it; the cache path names the topology.
#include "runtime/comm/engine/tuning.h"
#include "runtime/core/error.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

using namespace shardtrain;
using namespace shardtrain::comm;

namespace {

TopologyFingerprint four_ranks() { return {4, 2, 2, true, 0x1234abcdu}; }

}  // namespace

TEST(Tuning, ChoosesTheAlgorithmMeasuredAtTheNearestSizeByRatio) {
  Tuning t(four_ranks());
  t.add("allreduce", {64 << 10, "oneshot", 1e-5});
  t.add("allreduce", {4 << 20, "ring", 1e-3});
  t.add("allreduce", {1 << 20, "mpi", 3e-4});
  EXPECT_EQ(t.choose("allreduce", 1), "oneshot");
  EXPECT_EQ(t.choose("allreduce", 200 << 10), "oneshot");  // 3.1x above 64 KiB, 5.1x below 1 MiB
  EXPECT_EQ(t.choose("allreduce", 300 << 10), "mpi");
  EXPECT_EQ(t.choose("allreduce", 3 << 20), "ring");
  EXPECT_EQ(t.choose("allreduce", int64_t(1) << 30), "ring");
  EXPECT_EQ(t.choose("allgather", 1 << 20), "");  // not measured: the thresholds decide
}

TEST(Tuning, AFileRoundTripsAndNamesItsTopology) {
  Tuning t(four_ranks());
  t.add("reduce_scatter", {1 << 20, "ring", 2e-4});
  t.add("allgather", {4096, "mpi", 1e-5});
  const std::string path = ::testing::TempDir() + "/tuning-roundtrip.json";
  t.save(path);
  const Tuning back = Tuning::load(path);
  EXPECT_TRUE(back.matches(four_ranks()));
  EXPECT_EQ(back.fingerprint().key(), "4r-2n-2g-shm-1234abcd");
  EXPECT_EQ(back.choose("reduce_scatter", 1 << 20), "ring");
  EXPECT_EQ(back.choose("allgather", 4096), "mpi");
  EXPECT_EQ(back.applies_up_to(), 0);
  t.apply_up_to(2 << 20);  // the probes' limit and extrapolation survive the cache
  t.set_beyond("allgather", "ring");
  t.save(path);
  const Tuning probed = Tuning::load(path);
  EXPECT_EQ(probed.applies_up_to(), 2 << 20);
  EXPECT_EQ(probed.choose("reduce_scatter", 2 << 20), "ring");
  EXPECT_EQ(probed.choose("reduce_scatter", 3 << 20), "");  // nothing set beyond: the thresholds
  EXPECT_EQ(probed.choose("allgather", 3 << 20), "ring");
  TopologyFingerprint other = four_ranks();
  other.ranks_per_node = 4;
  EXPECT_FALSE(back.matches(other));
  std::remove(path.c_str());
}

TEST(Tuning, AFileThatIsNotOneIsAnErrorNamingIt) {
  const std::string path = ::testing::TempDir() + "/not-tuning.json";
  std::ofstream(path) << "{\"ops\": {}}";
  try {
    Tuning::load(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + " is not a tuning file"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(Tuning::load(path), Error);  // missing
}

TEST(Tuning, TheCacheIsUnderXdgCacheHomeByTopology) {
  const char* before = std::getenv("XDG_CACHE_HOME");
  const std::string saved = before ? before : "";
  setenv("XDG_CACHE_HOME", "/some/cache", 1);
  EXPECT_EQ(cached_tuning_path(four_ranks()), "/some/cache/shardtrain/comm-tuning-4r-2n-2g-shm-1234abcd.json");
  if (before)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
}
