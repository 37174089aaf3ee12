// OpScope and take_op_times: host-clock timing per class, nesting counted
// once, nothing recorded while off, and the device timer's hooks (a fake
// one here; the CUDA events are exercised by the GPU check).
#include "runtime/core/op_timing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace shardtrain;

namespace {

void busy_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Counts begin/end pairs and reports each as 1 ms of device time.
class FakeDeviceTimer final : public DeviceOpTimer {
 public:
  int64_t begin(OpClass c) override {
    open.push_back(c);
    return int64_t(open.size()) - 1;
  }
  void end(int64_t token) override { ended.push_back(token); }
  void collect(OpTimes& into) override {
    for (OpClass c : open) {
      into.seconds[size_t(c)] += 1e-3;
      into.calls[size_t(c)] += 1;
    }
    open.clear();
    ++collects;
  }
  std::vector<OpClass> open;
  std::vector<int64_t> ended;
  int collects = 0;
};

class OpTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    set_op_timing(true);
    take_op_times();
  }
  void TearDown() override {
    register_device_op_timer(nullptr);
    set_op_timing(false);
    take_op_times();
  }
};

TEST_F(OpTiming, HostScopesAddWallTimePerClass) {
  for (int i = 0; i < 3; ++i) {
    const OpScope s(OpClass::linear, false);
    busy_for(std::chrono::microseconds(2000));
  }
  {
    const OpScope s(OpClass::norm, false);
    busy_for(std::chrono::microseconds(1000));
  }
  const OpTimes t = take_op_times();
  EXPECT_EQ(t.calls[size_t(OpClass::linear)], 3);
  EXPECT_EQ(t.calls[size_t(OpClass::norm)], 1);
  EXPECT_GE(t.seconds[size_t(OpClass::linear)], 6e-3);
  EXPECT_GE(t.seconds[size_t(OpClass::norm)], 1e-3);
  EXPECT_LT(t.seconds[size_t(OpClass::norm)], t.seconds[size_t(OpClass::linear)]);
  EXPECT_EQ(t.calls[size_t(OpClass::attention)], 0);
  EXPECT_EQ(t.seconds[size_t(OpClass::attention)], 0.0);
  EXPECT_TRUE(t.any());
  // Taken: the next take starts from zero.
  EXPECT_FALSE(take_op_times().any());
}

TEST_F(OpTiming, NestedScopesCountOnceInTheOutermostClass) {
  {
    const OpScope outer(OpClass::attention, false);
    const OpScope inner(OpClass::copy, false);
    busy_for(std::chrono::microseconds(1000));
  }
  const OpTimes t = take_op_times();
  EXPECT_EQ(t.calls[size_t(OpClass::attention)], 1);
  EXPECT_EQ(t.calls[size_t(OpClass::copy)], 0);
  EXPECT_GE(t.seconds[size_t(OpClass::attention)], 1e-3);
  // The depth came back: a later scope is timed again.
  { const OpScope again(OpClass::copy, false); }
  EXPECT_EQ(take_op_times().calls[size_t(OpClass::copy)], 1);
}

TEST_F(OpTiming, OffRecordsNothing) {
  set_op_timing(false);
  {
    const OpScope s(OpClass::linear, false);
    busy_for(std::chrono::microseconds(500));
  }
  EXPECT_FALSE(take_op_times().any());
}

TEST_F(OpTiming, ScopesOnSeveralThreadsAllCount) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([] {
      for (int k = 0; k < 100; ++k) const OpScope s(OpClass::convert, false);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(take_op_times().calls[size_t(OpClass::convert)], 400);
}

TEST_F(OpTiming, DeviceScopesGoToTheRegisteredTimer) {
  FakeDeviceTimer fake;
  register_device_op_timer(&fake);
  { const OpScope s(OpClass::attention, /*on_device=*/true); }
  { const OpScope s(OpClass::linear, /*on_device=*/true); }
  { const OpScope s(OpClass::norm, /*on_device=*/false); }  // a host op in the same step
  ASSERT_EQ(fake.open.size(), 2U);
  EXPECT_EQ(fake.ended, (std::vector<int64_t>{0, 1}));
  const OpTimes t = take_op_times();
  EXPECT_EQ(fake.collects, 1);
  EXPECT_DOUBLE_EQ(t.seconds[size_t(OpClass::attention)], 1e-3);
  EXPECT_DOUBLE_EQ(t.seconds[size_t(OpClass::linear)], 1e-3);
  EXPECT_EQ(t.calls[size_t(OpClass::norm)], 1);
}

TEST_F(OpTiming, DeviceScopeWithoutATimerUsesTheHostClock) {
  { const OpScope s(OpClass::pool, /*on_device=*/true); }
  EXPECT_EQ(take_op_times().calls[size_t(OpClass::pool)], 1);
}

TEST(OpClassNames, AreDistinctAndNamed) {
  std::vector<std::string> names;
  for (size_t i = 0; i < kOpClasses; ++i) names.emplace_back(op_class_name(OpClass(i)));
  EXPECT_EQ(names.front(), "linear");
  EXPECT_EQ(names.back(), "copy");
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
}

}  // namespace
