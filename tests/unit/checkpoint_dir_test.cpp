// Naming, listing and pruning checkpoints; the pieces of each layout.
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/parallel/pieces.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace shardtrain::checkpoint {
namespace {
namespace fs = std::filesystem;

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/st-ckdir-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const std::string& name) { std::ofstream(fs::path(dir_) / name) << "x"; }
  std::string dir_;
};

TEST_F(CheckpointDirTest, NewestCompleteCheckpointWinsAndTemporaryFilesNeverDo) {
  EXPECT_FALSE(latest_checkpoint(dir_ + "/missing").has_value());
  EXPECT_FALSE(latest_checkpoint(dir_).has_value());
  touch("step-00000010.h5");
  touch("step-00000100.h5");
  touch("step-00000020.h5");
  touch("step-00000200.h5.tmp");  // a write that never finished
  touch("notes.txt");
  const auto latest = latest_checkpoint(dir_);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 100);
  EXPECT_EQ(latest->path, checkpoint_path(dir_, 100));
  EXPECT_EQ(checkpoint_path(dir_, 100), dir_ + "/step-00000100.h5");
  ASSERT_EQ(list_checkpoints(dir_).size(), 3u);
  EXPECT_EQ(list_checkpoints(dir_)[0].step, 10);
}

TEST_F(CheckpointDirTest, KeepLatestPrunesOldCheckpointsAndStaleTemporaries) {
  for (int s : {10, 20, 30, 40}) touch(fmt::format("step-{:08d}.h5", s));
  touch("step-00000025.h5.tmp");         // older than the newest: a crashed write, superseded
  touch("step-00000025.h5.tmp.data.1");  // what MPI-IO kept beside it for rank 1
  touch("step-00000050.h5.tmp");         // newer: possibly being written now, kept
  touch("step-00000050.h5.tmp.metadata.0");
  const auto removed = keep_latest(dir_, 2);
  EXPECT_EQ(removed.size(), 4u);
  EXPECT_FALSE(fs::exists(checkpoint_path(dir_, 10)));
  EXPECT_FALSE(fs::exists(checkpoint_path(dir_, 20)));
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000025.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000025.h5.tmp.data.1"));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir_, 30)));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir_, 40)));
  EXPECT_TRUE(fs::exists(dir_ + "/step-00000050.h5.tmp"));
  EXPECT_TRUE(fs::exists(dir_ + "/step-00000050.h5.tmp.metadata.0"));
}

// A run resumed from step 20 of a directory that holds 30 and 40 (or one
// started afresh there): those belong to an earlier run. Set aside, they are
// neither listed nor pruned in place of the new run's checkpoints.
TEST_F(CheckpointDirTest, NewerCheckpointsOfAnEarlierRunAreSetAside) {
  for (int s : {10, 20, 30, 40}) touch(fmt::format("step-{:08d}.h5", s));
  const auto moved = set_aside_newer_than(dir_, 20, "t1");
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(moved[0], checkpoint_path(dir_, 30) + ".superseded-t1");
  EXPECT_TRUE(fs::exists(moved[1]));
  ASSERT_EQ(list_checkpoints(dir_).size(), 2u);
  EXPECT_EQ(latest_checkpoint(dir_)->step, 20);
  touch("step-00000025.h5");  // the resumed run's next checkpoint
  keep_latest(dir_, 2);
  EXPECT_TRUE(fs::exists(checkpoint_path(dir_, 25)));
  EXPECT_TRUE(fs::exists(moved[0]));  // never pruned
  EXPECT_TRUE(set_aside_newer_than(dir_, 25, "t2").empty());
  EXPECT_EQ(set_aside_newer_than(dir_, 0, "t3").size(), 2u);  // a fresh start
  EXPECT_TRUE(list_checkpoints(dir_).empty());
}

TEST(CheckpointPieces, FsdpPiecesTileTheFlatBufferOverTheRanks) {
  const std::vector<nn::BlockRange> blocks = {{0, 48}, {48, 112}, {160, 16}};
  for (int world : {1, 2, 3, 4, 7}) {
    const parallel::ShardLayout layout(blocks, world);
    std::vector<int> written(176, 0);
    for (int r = 0; r < world; ++r)
      for (const parallel::Piece& p : fsdp_shard(layout, r)) {
        EXPECT_GE(p.local_offset, 0);
        EXPECT_LE(p.local_offset + p.numel(), layout.shard_numel());
        for (int64_t i = p.flat_begin; i < p.flat_end; ++i) ++written[size_t(i)];
      }
    for (const nn::BlockRange& b : blocks)
      for (int64_t i = b.offset; i < b.offset + b.numel; ++i) EXPECT_EQ(written[size_t(i)], 1) << world << " " << i;
  }
  int64_t total = 0;
  for (int r = 0; r < 3; ++r) total += total_numel(parallel::replicated_slice(176, r, 3));
  EXPECT_EQ(total, 176);
  EXPECT_EQ(total_numel(parallel::whole_buffer(176)), 176);
}

}  // namespace
}  // namespace shardtrain::checkpoint
