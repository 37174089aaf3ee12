// The read pool: every task runs once per run() and no more than the
// pool's threads at a time; run() returns only when all are done; a failing
// task does not stop the others, and the failure of the lowest index is the
// one rethrown; the pool serves one run after another; a job submitted
// behind another starts on the threads the first no longer needs, and each
// is waited for on its own.
#include "io/read_pool.h"

#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace shardtrain;

TEST(ReadPool, RunsEveryTaskOnceAtMostThreadsAtATime) {
  io::ReadPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::atomic<int>> ran(100);
    std::atomic<int> running{0}, most{0};
    pool.run(100, [&](int64_t i) {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      ++ran[size_t(i)];
      --running;
    });
    for (const auto& r : ran) EXPECT_EQ(r.load(), 1);
    EXPECT_LE(most.load(), 4);
    EXPECT_GE(most.load(), 2) << "the tasks never overlapped";
  }
}

TEST(ReadPool, EveryTaskRunsAndTheLowestFailureIsRethrown) {
  io::ReadPool pool(3);
  std::atomic<int> ran{0};
  try {
    pool.run(50, [&](int64_t i) {
      ++ran;
      if (i == 41 || i == 17 || i == 30) throw Error(fmt::format("task {} failed", i));
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "task 17 failed");
  }
  EXPECT_EQ(ran.load(), 50);
  std::atomic<int> after{0};
  pool.run(5, [&](int64_t) { ++after; });
  EXPECT_EQ(after.load(), 5);
}

TEST(ReadPool, ASecondJobRunsOnThreadsTheFirstNoLongerNeeds) {
  io::ReadPool pool(4);
  std::atomic<bool> release{false};
  std::atomic<int> first_done{0}, second_done{0};
  // The first job's last task blocks until the second job has finished:
  // that can only happen if the second runs beside it.
  const io::ReadPool::Ticket first = pool.submit(4, [&](int64_t i) {
    if (i == 3)
      while (!release) std::this_thread::sleep_for(std::chrono::microseconds(100));
    ++first_done;
  });
  const io::ReadPool::Ticket second = pool.submit(20, [&](int64_t) { ++second_done; });
  pool.wait(second);
  EXPECT_EQ(second_done.load(), 20);
  EXPECT_LT(first_done.load(), 4);
  release = true;
  pool.wait(first);
  EXPECT_EQ(first_done.load(), 4);
}

TEST(ReadPool, NothingToRunReturnsAtOnceAndBadSizesAreRefused) {
  io::ReadPool pool(1);
  pool.run(0, [](int64_t) { FAIL(); });
  EXPECT_THROW(io::ReadPool(0), Error);
}
