// Issue order and Work semantics: many collectives issued without waiting run
// strictly one after the other in issue order and each is right; test()
// never blocks; the timestamps telemetry reads are sane.
#include "tests/mpi/comm_test_util.h"

#include "runtime/core/clock.h"

#include <chrono>
#include <thread>

namespace shardtrain::comm::testing {
namespace {

void check_issue_order(const std::string& config) {
  SCOPED_TRACE("config " + config);
  Communicator& c = world(config);
  const int p = c.size(), r = c.rank();
  struct Issued {
    WorkPtr work;
    Tensor result;
    bool gather;
    int64_t n;
  };
  std::vector<Issued> issued;
  const double before = now_seconds();
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 1 + (i * 37) % 1500;  // 4 B .. 6 KB: both sides of the 2 KiB threshold
    if (i % 3 == 2) {
      Tensor in = to_tensor(input(uint64_t(i), r, n, DType::f32), DType::f32);
      Tensor out = Tensor::empty({p * n});
      issued.push_back({c.allgather(in, out), out, true, n});
    } else {
      // Sums of p values k + i are exact: compare bit for bit.
      std::vector<float> v(static_cast<size_t>(n), float(r + i));
      Tensor t = to_tensor(v, DType::f32);
      issued.push_back({c.allreduce(t, ReduceOp::sum), t, false, n});
    }
  }
  for (Issued& x : issued) x.work->wait();

  // One after the other, except small all-reduces queued behind each other,
  // which may run as one group (coalesced: finished together, each started
  // when the rank reached it, in order).
  double previous_start = before, previous_finish = before;
  int64_t previous_seq = -1;
  for (size_t i = 0; i < issued.size(); ++i) {
    const Issued& x = issued[i];
    SCOPED_TRACE(fmt::format("collective {}", i));
    const Work& w = *x.work;
    EXPECT_GT(w.seq(), previous_seq);
    const bool same_group = i > 0 && !x.gather && !issued[i - 1].gather && w.started_at() >= previous_start &&
                            w.finished_at() == previous_finish;
    if (!same_group) {
      EXPECT_GE(w.started_at(), previous_finish) << "started before the previous collective finished";
    }
    EXPECT_GE(w.finished_at(), w.started_at());
    previous_start = w.started_at();
    previous_finish = w.finished_at();
    previous_seq = w.seq();
    const std::vector<float> got = to_vector(x.result);
    if (x.gather) {
      for (int k = 0; k < p; ++k) {
        const std::vector<float> want = input(uint64_t(i), k, x.n, DType::f32);
        for (int64_t j = 0; j < x.n; ++j) ASSERT_EQ(got[size_t(k * x.n + j)], want[size_t(j)]);
      }
    } else {
      const float want = float(p * int(i) + p * (p - 1) / 2);
      for (float g : got) ASSERT_EQ(g, want);
    }
  }
  EXPECT_LE(previous_finish, now_seconds());
}

TEST(CommOrdering, ManyAsyncCollectivesRunInIssueOrder) {
  check_issue_order("auto-small");  // point to point: one-shot, mpi and ring all-reduces mixed
  check_issue_order("auto");        // all-reduces through shared memory
}

TEST(CommOrdering, TestNeverBlocksAndWaitCountsBlockedTime) {
  Communicator& c = world("auto");
  Tensor t = Tensor::zeros({1024});
  if (c.size() > 1 && c.rank() == 0) {
    // Rank 0 arrives late: the others' collective cannot complete before.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const double t0 = now_seconds();
  WorkPtr w = c.allreduce(t, ReduceOp::sum);
  const bool done_at_once = w->test();
  EXPECT_LT(now_seconds() - t0, 0.1) << "issuing and test() must not block";
  if (c.size() > 1 && c.rank() != 0) {
    EXPECT_FALSE(done_at_once);
  }
  w->wait();
  EXPECT_TRUE(w->test());
  EXPECT_GE(w->blocked_seconds(), 0.0);
  if (c.size() > 1 && c.rank() != 0) {
    EXPECT_GT(w->blocked_seconds(), 0.1);  // it waited for rank 0
  }
  EXPECT_GE(w->started_at(), t0);
  EXPECT_GE(w->finished_at(), w->started_at());
  EXPECT_LE(w->finished_at(), now_seconds());
  // Waiting again neither blocks nor adds time.
  const double blocked = w->blocked_seconds();
  w->wait();
  EXPECT_EQ(w->blocked_seconds(), blocked);
}

TEST(CommOrdering, SequenceNumbersCountPerCommunicator) {
  Communicator& c = world("ring");
  Tensor t = Tensor::zeros({16});
  WorkPtr a = c.allreduce(t, ReduceOp::sum);
  WorkPtr b = c.barrier();
  WorkPtr d = c.broadcast(t, 0);
  d->wait();
  EXPECT_EQ(b->seq(), a->seq() + 1);
  EXPECT_EQ(d->seq(), b->seq() + 1);
  EXPECT_TRUE(a->test());  // done, since d (issued after it) is
  EXPECT_TRUE(b->test());
}

TEST(CommOrdering, SubCommunicatorsRunConcurrentlyWithTheWorld) {
  Communicator& w = world("auto-small");
  Communicator& node = w.node();
  Communicator& cross = w.cross_node();
  const int64_t n = 5000;  // ring-sized for auto-small
  Tensor a = to_tensor(std::vector<float>(n, 1.0f), DType::f32);
  Tensor b = to_tensor(std::vector<float>(n, 2.0f), DType::f32);
  Tensor d = to_tensor(std::vector<float>(n, 3.0f), DType::f32);
  WorkPtr wa = w.allreduce(a, ReduceOp::sum);
  WorkPtr wb = node.allreduce(b, ReduceOp::sum);
  WorkPtr wd = cross.allreduce(d, ReduceOp::avg);
  wd->wait();
  wb->wait();
  wa->wait();
  for (float x : to_vector(a)) ASSERT_EQ(x, float(w.size()));
  for (float x : to_vector(b)) ASSERT_EQ(x, 2.0f * float(node.size()));
  for (float x : to_vector(d)) ASSERT_EQ(x, 3.0f);
}

}  // namespace
}  // namespace shardtrain::comm::testing
