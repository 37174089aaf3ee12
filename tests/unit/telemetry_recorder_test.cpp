// The span recorder: every span drained exactly once, recent() per thread in
// order and never torn, ring overwrite, disabled, lanes and thread names.
#include "runtime/telemetry/recorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <latch>
#include <map>
#include <set>
#include <thread>

using namespace shardtrain::telemetry;

namespace {

// Tests share the process's recorder: each uses its own span names (compared
// by pointer, as the recorder stores them) and filters on them.
std::vector<SpanEvent> named(const std::vector<SpanEvent>& spans, const char* name) {
  std::vector<SpanEvent> out;
  for (const auto& e : spans)
    if (e.name == name) out.push_back(e);
  return out;
}

// A span whose fields all derive from seq, so a torn read shows.
SpanEvent numbered(const char* name, int64_t seq) {
  SpanEvent e;
  e.name = name;
  e.category = "test";
  e.seq = seq;
  e.start_s = static_cast<double>(seq);
  e.end_s = static_cast<double>(seq) + 0.5;
  e.bytes = 2 * seq;
  return e;
}

bool consistent(const SpanEvent& e) {
  return e.start_s == static_cast<double>(e.seq) && e.end_s == e.start_s + 0.5 && e.bytes == 2 * e.seq &&
         std::string(e.category) == "test";
}

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rec.enable(4096, true);
    (void)rec.drain();  // what earlier tests left
  }
  void TearDown() override {
    rec.enable(4096, true);
    (void)rec.drain();
  }
  Recorder& rec = Recorder::instance();
};

TEST_F(RecorderTest, SpansFromSeveralThreadsAppearInDrainExactlyOnce) {
  static const char* const kName = "several threads";
  constexpr int kThreads = 4, kSpans = 5000;  // several queue chunks per thread
  std::vector<SpanEvent> drained;
  std::atomic<int> running{kThreads};
  std::latch all_done(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kSpans; ++i) rec.record(numbered(kName, int64_t{t} * 1'000'000 + i));
      running.fetch_sub(1);
      all_done.arrive_and_wait();  // all alive at once: an exited thread's tid passes to the next
    });
  // Drain while they record: the consumer runs concurrently with producers.
  while (running.load() > 0) {
    auto batch = named(rec.drain(), kName);
    drained.insert(drained.end(), batch.begin(), batch.end());
  }
  for (auto& th : threads) th.join();
  auto rest = named(rec.drain(), kName);
  drained.insert(drained.end(), rest.begin(), rest.end());

  ASSERT_EQ(drained.size(), size_t{kThreads} * kSpans);
  std::set<int64_t> seen;
  std::map<int64_t, std::set<int>> tids_of_thread;
  for (const auto& e : drained) {
    EXPECT_TRUE(consistent(e));
    EXPECT_TRUE(seen.insert(e.seq).second) << "span " << e.seq << " drained twice";
    tids_of_thread[e.seq / 1'000'000].insert(e.tid);
  }
  std::set<int> tids;
  for (const auto& [thread, ts] : tids_of_thread) {
    ASSERT_EQ(ts.size(), 1u) << "thread " << thread << " recorded under several tids";
    tids.insert(*ts.begin());
  }
  EXPECT_EQ(tids.size(), size_t{kThreads});  // concurrent threads never share a tid
  EXPECT_TRUE(named(rec.drain(), kName).empty());
}

TEST_F(RecorderTest, RecentReturnsTheNewestNPerThreadOldestFirst) {
  static const char* const kName = "recent per thread";
  std::latch recorded(2), release(1);
  auto worker = [&](int64_t base) {
    for (int64_t i = 0; i < 100; ++i) rec.record(numbered(kName, base + i));
    recorded.count_down();
    release.wait();  // stay alive: an exited thread's buffer may pass to the next thread
  };
  std::thread a(worker, 0), b(worker, 1000);
  recorded.wait();
  const auto recent = named(rec.recent(10), kName);
  release.count_down();
  a.join();
  b.join();

  std::map<int, std::vector<int64_t>> by_tid;
  for (const auto& e : recent) by_tid[e.tid].push_back(e.seq);
  ASSERT_EQ(by_tid.size(), 2u);
  std::set<std::vector<int64_t>> lists;
  for (auto& [tid, seqs] : by_tid) lists.insert(seqs);
  std::vector<int64_t> newest_a, newest_b;
  for (int64_t i = 90; i < 100; ++i) {
    newest_a.push_back(i);
    newest_b.push_back(1000 + i);
  }
  EXPECT_EQ(lists, (std::set<std::vector<int64_t>>{newest_a, newest_b}));
  // Newest last overall: ordered by end time.
  EXPECT_TRUE(std::is_sorted(recent.begin(), recent.end(),
                             [](const SpanEvent& x, const SpanEvent& y) { return x.end_s < y.end_s; }));
}

TEST_F(RecorderTest, TheRingKeepsOnlyTheLastCapacitySpansButTheTraceKeepsAll) {
  static const char* const kName = "ring overwrite";
  rec.enable(8, true);  // applies to threads that register from now on
  std::latch recorded(1), release(1);
  std::thread t([&] {
    for (int64_t i = 0; i < 20; ++i) rec.record(numbered(kName, i));
    recorded.count_down();
    release.wait();
  });
  recorded.wait();
  const auto recent = named(rec.recent(100), kName);
  const auto drained = named(rec.drain(), kName);
  release.count_down();
  t.join();

  std::vector<int64_t> seqs;
  for (const auto& e : recent) seqs.push_back(e.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(drained.size(), 20u);
}

TEST_F(RecorderTest, DisabledRecordsNothing) {
  static const char* const kName = "while disabled";
  rec.disable();
  EXPECT_FALSE(rec.enabled());
  rec.record(numbered(kName, 1));
  { Span s(kName, "test"); }
  {
    Span s(kName, "test");
    rec.enable(4096, true);  // on at the end but not at the start: not recorded either
  }
  EXPECT_TRUE(rec.enabled());
  EXPECT_TRUE(named(rec.drain(), kName).empty());
  EXPECT_TRUE(named(rec.recent(4096), kName).empty());
}

TEST_F(RecorderTest, SpanRecordsItsIntervalOnTheCallingThread) {
  static const char* const kName = "scoped";
  { Span s(kName, "compute", 7); }
  const auto spans = named(rec.drain(), kName);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_STREQ(spans[0].category, "compute");
  EXPECT_EQ(spans[0].seq, 7);
  EXPECT_EQ(spans[0].bytes, -1);
  EXPECT_EQ(spans[0].detail, nullptr);
  EXPECT_GT(spans[0].start_s, 0);
  EXPECT_LE(spans[0].start_s, spans[0].end_s);
  EXPECT_LT(spans[0].tid, Recorder::kFirstLaneTid);
}

TEST_F(RecorderTest, LanesKeepTheirTidAndThreadsHaveNames) {
  static const char* const kName = "on a lane";
  static const char* const kMine = "on my thread";
  const int lane = rec.lane("comm engine");
  EXPECT_GE(lane, Recorder::kFirstLaneTid);
  EXPECT_EQ(rec.lane("comm engine"), lane);
  EXPECT_NE(rec.lane("another lane"), lane);

  rec.name_thread("train");
  SpanEvent e = numbered(kName, 3);
  e.tid = lane;
  rec.record(e);
  rec.record(numbered(kMine, 4));  // tid 0 in the event: the thread's tid is used
  const auto drained = rec.drain();
  ASSERT_EQ(named(drained, kName).size(), 1u);
  EXPECT_EQ(named(drained, kName)[0].tid, lane);
  ASSERT_EQ(named(drained, kMine).size(), 1u);
  const int mine = named(drained, kMine)[0].tid;
  EXPECT_LT(mine, Recorder::kFirstLaneTid);

  const auto threads = rec.threads();
  auto name_of = [&](int tid) {
    for (const auto& [t, n] : threads)
      if (t == tid) return n;
    return std::string("(none)");
  };
  EXPECT_EQ(name_of(mine), "train");
  EXPECT_EQ(name_of(lane), "comm engine");
  EXPECT_TRUE(std::is_sorted(threads.begin(), threads.end()));
}

TEST_F(RecorderTest, RecentAndDrainWhileOthersRecordSeeNoTornSpans) {
  static const char* const kName = "concurrent";
  constexpr int kThreads = 3;
  rec.enable(64, true);  // a small ring: overwrites all the time
  std::atomic<bool> stop{false};
  std::atomic<int> writers_done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < 200'000 && !stop.load(std::memory_order_relaxed); ++i)
        rec.record(numbered(kName, int64_t{t} * 1'000'000'000 + i));
      writers_done.fetch_add(1);
    });
  int64_t seen = 0;
  // At least 300 rounds, and on a loaded machine (where the writers may not
  // have run yet) on until some spans were seen concurrently or the writers ended.
  for (int round = 0; round < 300 || (seen == 0 && writers_done.load() < kThreads); ++round) {
    const auto recent = named(rec.recent(32), kName);
    std::map<int, int64_t> last;  // per tid, seqs must increase
    for (const auto& e : recent) {
      ASSERT_TRUE(consistent(e)) << "torn span seq " << e.seq;
      auto it = last.find(e.tid);
      if (it != last.end()) {
        EXPECT_GT(e.seq, it->second);
      }
      last[e.tid] = e.seq;
    }
    for (const auto& [tid, n] : last) {
      auto on_tid = [&](const SpanEvent& x) { return x.tid == tid; };
      EXPECT_LE(std::count_if(recent.begin(), recent.end(), on_tid), 32);
    }
    for (const auto& e : named(rec.drain(), kName)) {
      ASSERT_TRUE(consistent(e));
      ++seen;
    }
  }
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_GT(seen, 0);
}

TEST(Recorder, InternGivesOneStablePointerPerString) {
  const char* a = Recorder::intern(std::string("wait bucket ") + "3");
  const char* b = Recorder::intern("wait bucket 3");
  EXPECT_EQ(a, b);
  EXPECT_STREQ(a, "wait bucket 3");
  EXPECT_NE(Recorder::intern("wait bucket 4"), a);
}

}  // namespace
