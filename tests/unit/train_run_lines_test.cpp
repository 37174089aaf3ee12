// The lines a run prints (runtime/train/run_lines.h): the batch split as the
// sampler makes it.
#include "runtime/train/run_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace shardtrain;
using namespace shardtrain::train;
using ::testing::HasSubstr;

namespace {

std::string ready(int64_t global, int64_t world) {
  ReadyFigures r;
  r.optimizer = "sgd";
  r.global_batch = global;
  r.world = world;
  return ready_line(r, Config::Target{});
}

TEST(RunLines, ReadyLineShowsTheBatchSplitAsTheSamplerMakesIt) {
  EXPECT_THAT(ready(128, 2), HasSubstr("global batch 128 (64 per rank, 1 micro-batch(es))"));
  // io::Sampler: rank r takes [B r / W, B (r + 1) / W): sizes 63 and 64.
  EXPECT_THAT(ready(127, 2), HasSubstr("global batch 127 (64 per rank on 1 rank(s), 63 on 1, 1 micro-batch(es))"));
  EXPECT_THAT(ready(10, 4), HasSubstr("global batch 10 (3 per rank on 2 rank(s), 2 on 2,"));
  EXPECT_THAT(ready(7, 1), HasSubstr("global batch 7 (7 per rank,"));
}

TEST(RunLines, GraphsLineSaysWhatReplayedAndWhyGraphsWentOff) {
  EXPECT_EQ(graphs_line(2, 38, ""), "[summary] CUDA graphs: 2 made, 38 micro-batches replayed");
  EXPECT_EQ(graphs_line(0, 0, "capturing a micro-batch failed: operation not permitted"),
            "[summary] CUDA graphs: 0 made, 0 micro-batches replayed; off since: capturing a micro-batch failed: "
            "operation not permitted");
}

}  // namespace
