// StepGraphs (runtime/train/step_graphs.h) with a stand-in backend that
// records what would be captured and launched: the warm-up runs eagerly,
// the second run of a key is captured, later ones are launched; memory that
// moves drops the graphs; a failed capture runs the body eagerly and turns
// graphs off.
#include "runtime/train/step_graphs.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace shardtrain::train {
namespace {

struct FakeBackend final : GraphBackend {
  int* captures;
  int* launches;
  std::pair<int64_t, int64_t>* memory;
  bool* refuse;
  std::shared_ptr<void> capture(const std::function<void()>& /*work*/, std::string* why) override {
    if (*refuse) {
      *why = "refused";
      return nullptr;
    }
    ++*captures;
    return std::make_shared<int>(*captures);
  }
  void launch(const std::shared_ptr<void>& graph) override {
    ASSERT_NE(graph, nullptr);
    ++*launches;
  }
  std::pair<int64_t, int64_t> memory_state() override { return *memory; }
};

struct Fixture {
  int captures = 0, launches = 0, eager = 0;
  std::pair<int64_t, int64_t> memory{10, 0};
  bool refuse = false;
  StepGraphs graphs;
  Fixture() : graphs(make()) {}
  std::unique_ptr<GraphBackend> make() {
    auto b = std::make_unique<FakeBackend>();
    b->captures = &captures;
    b->launches = &launches;
    b->memory = &memory;
    b->refuse = &refuse;
    return b;
  }
  bool run(int64_t m, const void* x = nullptr) {
    return graphs.run({m, 2, 8, 8, x, nullptr, false}, [&] { ++eager; });
  }
};

TEST(StepGraphs, WarmsUpThenCapturesThenReplays) {
  Fixture f;
  EXPECT_FALSE(f.run(0));  // warm-up: eager
  EXPECT_EQ(f.eager, 1);
  EXPECT_TRUE(f.run(0));  // captured, then launched
  EXPECT_EQ(f.captures, 1);
  EXPECT_EQ(f.launches, 1);
  EXPECT_TRUE(f.run(0));  // replayed
  EXPECT_EQ(f.captures, 1);
  EXPECT_EQ(f.launches, 2);
  EXPECT_EQ(f.eager, 1);  // the body ran on the host once; the capture's run was only recorded
  // Another key (the second micro-batch, the other input slot) has its own.
  EXPECT_FALSE(f.run(1));
  EXPECT_TRUE(f.run(1));
  int dummy = 0;
  EXPECT_FALSE(f.run(0, &dummy));
  EXPECT_EQ(f.captures, 2);
}

TEST(StepGraphs, MovedMemoryDropsTheGraphsAndWarmsUpAgain) {
  Fixture f;
  f.run(0);
  f.run(0);
  ASSERT_EQ(f.captures, 1);
  f.memory.first += 3;     // an evaluation allocated between steps
  EXPECT_FALSE(f.run(0));  // eager again: buffers may have moved
  EXPECT_TRUE(f.run(0));
  EXPECT_EQ(f.captures, 2);
  EXPECT_TRUE(f.graphs.enabled());
}

TEST(StepGraphs, AWarmUpThatAllocatesDropsOtherKeysGraphs) {
  Fixture f;
  f.run(0);
  f.run(0);  // key 0 captured
  f.graphs.run({1, 2, 8, 8, nullptr, nullptr, false}, [&] {
    ++f.eager;
    f.memory.second += 1024;  // key 1's warm-up grows a workspace
  });
  const int launches = f.launches;
  EXPECT_TRUE(f.run(0));  // key 0 is captured anew, not replayed from before
  EXPECT_EQ(f.captures, 2);
  EXPECT_EQ(f.launches, launches + 1);
}

TEST(StepGraphs, AFailedCaptureRunsEagerlyAndTurnsGraphsOff) {
  Fixture f;
  f.refuse = true;
  f.run(0);
  EXPECT_FALSE(f.run(0));
  EXPECT_EQ(f.eager, 2);  // the body ran eagerly after the refused capture
  EXPECT_FALSE(f.graphs.enabled());
  f.refuse = false;
  EXPECT_FALSE(f.run(0));
  EXPECT_EQ(f.captures, 0);
  EXPECT_EQ(f.eager, 3);
}

TEST(StepGraphs, MemoryThatKeepsMovingTurnsGraphsOff) {
  Fixture f;
  for (int step = 0; step < 12; ++step) {
    f.memory.first += 1;  // something allocates every step
    f.run(0);
  }
  EXPECT_FALSE(f.graphs.enabled());
  EXPECT_EQ(f.eager, 12);
}

}  // namespace
}  // namespace shardtrain::train
