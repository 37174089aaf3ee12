// The stream-ordered caching allocator's logic (runtime/core/block_pool) over
// a fake backend: segments from the heap that it counts, events that a test
// completes by hand.
#include "runtime/core/block_pool.h"
#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

using namespace shardtrain;

namespace {

constexpr size_t kKiB = size_t(1) << 10;
constexpr size_t kMiB = size_t(1) << 20;
constexpr StreamId kA{1}, kB{2}, kC{3};

class FakeBackend final : public BlockPoolBackend {
 public:
  explicit FakeBackend(size_t capacity = size_t(1) << 40) : capacity_(capacity) {}
  ~FakeBackend() override {
    for (auto& [ptr, bytes] : segments) std::free(ptr);
  }

  void* allocate_segment(size_t bytes) override {
    ++allocate_calls;
    if (held + bytes > capacity_) return nullptr;
    void* ptr = std::aligned_alloc(512, bytes);
    if (ptr == nullptr) return nullptr;
    segments[ptr] = bytes;
    held += bytes;
    ++allocations;
    return ptr;
  }
  void free_segment(void* ptr, size_t bytes) override {
    auto it = segments.find(ptr);
    if (it == segments.end() || it->second != bytes) {
      ADD_FAILURE() << "free_segment of " << ptr << " (" << bytes << " bytes), not a segment of that size";
      return;
    }
    std::free(ptr);
    held -= bytes;
    segments.erase(it);
    ++frees;
  }

  EventId record_event(StreamId stream) override {
    events.push_back({stream});
    return EventId(events.size() - 1);
  }
  bool event_done(EventId event) override {
    ++queries;
    return get(event).done;
  }
  void wait_event(EventId event) override {
    ++waits;
    get(event).done = true;
  }
  void release_event(EventId event) override {
    Event& e = get(event);
    if (e.released) ADD_FAILURE() << "event " << size_t(event) << " released twice";
    e.released = true;
  }

  // The stream's oldest event still running completes (a stream's events
  // complete in order); false if it has none.
  bool complete_oldest(StreamId stream) {
    for (Event& e : events) {
      if (e.stream == stream && !e.done) {
        e.done = true;
        return true;
      }
    }
    return false;
  }
  void complete_all(StreamId stream) {
    while (complete_oldest(stream)) {
    }
  }
  size_t events_on(StreamId stream) const {
    return size_t(std::count_if(events.begin(), events.end(), [&](const Event& e) { return e.stream == stream; }));
  }
  size_t unreleased_events() const {
    return size_t(std::count_if(events.begin(), events.end(), [](const Event& e) { return !e.released; }));
  }
  // The segment holding [ptr, ptr + bytes), if any.
  bool inside_a_segment(const void* ptr, size_t bytes) const {
    const auto* p = static_cast<const char*>(ptr);
    for (auto& [base, size] : segments) {
      const auto* b = static_cast<const char*>(base);
      if (p >= b && p + bytes <= b + size) return true;
    }
    return false;
  }

  std::map<void*, size_t> segments;
  size_t held = 0;
  int allocate_calls = 0, allocations = 0, frees = 0, queries = 0, waits = 0;

 private:
  struct Event {
    StreamId stream;
    bool done = false;
    bool released = false;
  };
  Event& get(EventId event) { return events.at(size_t(event)); }

  size_t capacity_;
  std::vector<Event> events;
};

char* as_bytes(void* p) { return static_cast<char*>(p); }

TEST(BlockPool, RoundsRequestsAndSizesSegments) {
  EXPECT_EQ(BlockPool::round_size(1), 512u);
  EXPECT_EQ(BlockPool::round_size(512), 512u);
  EXPECT_EQ(BlockPool::round_size(513), 1024u);
  EXPECT_EQ(BlockPool::segment_size(512), 2 * kMiB);
  EXPECT_EQ(BlockPool::segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(BlockPool::segment_size(kMiB + 512), 2 * kMiB);
  EXPECT_EQ(BlockPool::segment_size(5 * kMiB + 512), 6 * kMiB);
}

TEST(BlockPool, SplitsABlockAndHandsOutTheRest) {
  FakeBackend backend;
  BlockPool pool(backend);
  void* p = pool.allocate(1000, kA);
  BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB - 1024);
  EXPECT_EQ(pool.block_size(p), 1024u);

  void* q = pool.allocate(4096, kA);  // from the rest of the same segment
  EXPECT_EQ(as_bytes(q), as_bytes(p) + 1024);
  s = pool.stats();
  EXPECT_EQ(s.backend_allocations, 1);
  EXPECT_EQ(s.allocated_bytes, 1024u + 4096u);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB - 1024 - 4096);
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes + s.cached_bytes);
  pool.free(p);
  pool.free(q);
}

TEST(BlockPool, LargePoolKeepsASmallRestWithTheBlock) {
  FakeBackend backend;
  BlockPool pool(backend);
  // 1.5 MiB from a 2 MiB segment: half a MiB could serve only small
  // requests, which never come from the large pool.
  void* p = pool.allocate(kMiB + kMiB / 2, kA);
  EXPECT_EQ(pool.block_size(p), 2 * kMiB);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
  pool.free(p);
  // 3 MiB from that cached 2 MiB block does not fit: a new 4 MiB segment,
  // whose 1 MiB rest also stays with the block.
  void* q = pool.allocate(3 * kMiB, kA);
  EXPECT_EQ(pool.stats().backend_allocations, 2);
  EXPECT_EQ(pool.block_size(q), 4 * kMiB);
  pool.free(q);
}

TEST(BlockPool, FreedNeighboursCoalesceSoTheWholeSegmentServesAgain) {
  FakeBackend backend;
  BlockPool pool(backend);
  // Small pool: four quarters fill one 2 MiB segment.
  std::vector<void*> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(pool.allocate(512 * kKiB, kA));
  for (int i = 1; i < 4; ++i) EXPECT_EQ(as_bytes(quarters[size_t(i)]), as_bytes(quarters[0]) + i * 512 * kKiB);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
  for (int i : {2, 0, 3, 1}) pool.free(quarters[size_t(i)]);
  EXPECT_EQ(pool.stats().cached_bytes, 2 * kMiB);
  void* whole = pool.allocate(kMiB, kA);  // fits only in the merged block
  EXPECT_EQ(whole, quarters[0]);
  EXPECT_EQ(pool.stats().backend_allocations, 1);
  pool.free(whole);

  // Large pool: an 8 MiB segment cut in three, freed middle first.
  void* base = pool.allocate(8 * kMiB, kA);
  pool.free(base);
  void* a = pool.allocate(3 * kMiB, kA);
  void* b = pool.allocate(3 * kMiB, kA);
  void* c = pool.allocate(2 * kMiB, kA);
  EXPECT_EQ(a, base);
  EXPECT_EQ(as_bytes(b), as_bytes(base) + 3 * kMiB);
  EXPECT_EQ(as_bytes(c), as_bytes(base) + 6 * kMiB);
  EXPECT_EQ(pool.stats().backend_allocations, 2);
  pool.free(b);
  pool.free(a);
  pool.free(c);
  void* again = pool.allocate(8 * kMiB, kA);
  EXPECT_EQ(again, base);
  const BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.backend_allocations, 2);
  EXPECT_EQ(s.segments, 2);
  EXPECT_EQ(s.allocated_bytes, 8 * kMiB);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB);
  pool.free(again);
}

TEST(BlockPool, TakesTheSmallestFreeBlockThatFits) {
  FakeBackend backend;
  BlockPool pool(backend);
  // Holes of 16 KiB and 128 KiB in a segment whose tail (about 1.7 MiB) is
  // free too.
  void* a = pool.allocate(64 * kKiB, kA);
  void* b = pool.allocate(16 * kKiB, kA);
  void* c = pool.allocate(64 * kKiB, kA);
  void* d = pool.allocate(128 * kKiB, kA);
  void* e = pool.allocate(64 * kKiB, kA);
  pool.free(b);
  pool.free(d);
  EXPECT_EQ(pool.allocate(100 * kKiB, kA), d);
  EXPECT_EQ(pool.allocate(10 * kKiB, kA), b);
  EXPECT_EQ(pool.stats().backend_allocations, 1);

  // Large pool: separate segments of 4, 8 and 6 MiB, all freed.
  void* four = pool.allocate(4 * kMiB, kA);
  void* eight = pool.allocate(8 * kMiB, kA);
  void* six = pool.allocate(6 * kMiB, kA);
  for (void* p : {four, eight, six}) pool.free(p);
  EXPECT_EQ(pool.allocate(5 * kMiB, kA), six);
  EXPECT_EQ(pool.allocate(3 * kMiB, kA), four);
  EXPECT_EQ(pool.allocate(7 * kMiB, kA), eight);
  EXPECT_EQ(pool.stats().backend_allocations, 4);
  for (void* p : {a, b, c, d, e, four, eight, six}) pool.free(p);
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
}

TEST(BlockPool, AFreedBlockIsReusedOnlyByItsOwnStream) {
  FakeBackend backend;
  BlockPool pool(backend);
  void* p = pool.allocate(4096, kA);
  pool.free(p);
  void* q = pool.allocate(4096, kB);
  EXPECT_NE(q, p);
  EXPECT_EQ(pool.stats().backend_allocations, 2);  // B never takes from A's segment
  EXPECT_EQ(backend.segments.count(q), 1u);        // the start of a segment of its own
  void* r = pool.allocate(4096, kA);
  EXPECT_EQ(r, p);  // at once: A's own stream order makes it safe
  EXPECT_EQ(backend.events_on(kA) + backend.events_on(kB), 0u);
  pool.free(q);
  pool.free(r);
}

TEST(BlockPool, RecordStreamHoldsTheBlockUntilTheOtherStreamsEventCompletes) {
  FakeBackend backend;
  BlockPool pool(backend);
  void* p = pool.allocate(64 * kKiB, kA);
  pool.record_stream(as_bytes(p) + 100, kB);  // any address inside the allocation
  pool.record_stream(p, kA);                  // its own stream: nothing to wait for
  EXPECT_EQ(backend.events_on(kB), 0u);       // recorded when it is freed, not before
  pool.free(p);
  EXPECT_EQ(backend.events_on(kB), 1u);
  EXPECT_EQ(backend.events_on(kA), 0u);
  BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.pending_bytes, 64 * kKiB);
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes + s.cached_bytes + s.pending_bytes);

  void* q = pool.allocate(64 * kKiB, kA);  // B may still use p's block
  EXPECT_NE(q, p);
  EXPECT_GT(backend.queries, 0);
  pool.free(q);
  void* r = pool.allocate(64 * kKiB, kA);
  EXPECT_EQ(r, q);
  pool.free(r);

  backend.complete_all(kB);
  EXPECT_EQ(pool.stats().pending_bytes, 64 * kKiB);  // noticed on the next allocation only
  void* t = pool.allocate(64 * kKiB, kA);
  EXPECT_EQ(t, p);
  s = pool.stats();
  EXPECT_EQ(s.pending_bytes, 0u);
  EXPECT_EQ(s.backend_allocations, 1);
  EXPECT_EQ(backend.unreleased_events(), 0u);
  EXPECT_EQ(backend.waits, 0);
  pool.free(t);
}

TEST(BlockPool, ABlockUsedByTwoOtherStreamsWaitsForBoth) {
  FakeBackend backend;
  BlockPool pool(backend);
  void* p = pool.allocate(8 * kMiB, kA);
  pool.record_stream(p, kB);
  pool.record_stream(p, kC);
  pool.record_stream(p, kB);  // once is enough
  pool.free(p);
  EXPECT_EQ(backend.events_on(kB), 1u);
  EXPECT_EQ(backend.events_on(kC), 1u);
  backend.complete_all(kB);
  void* q = pool.allocate(8 * kMiB, kA);
  EXPECT_NE(q, p);  // C may still use it
  backend.complete_all(kC);
  void* r = pool.allocate(8 * kMiB, kA);
  EXPECT_EQ(r, p);
  EXPECT_EQ(pool.stats().backend_allocations, 2);
  pool.free(q);
  pool.free(r);
}

TEST(BlockPool, OutOfRoomGivesCachedSegmentsBackAndRetries) {
  FakeBackend backend(8 * kMiB);
  BlockPool pool(backend);
  void* p = pool.allocate(6 * kMiB, kA);
  pool.free(p);                           // cached: 6 MiB of the 8 held
  void* q = pool.allocate(7 * kMiB, kA);  // an 8 MiB segment fits only once the 6 are given back
  ASSERT_NE(q, nullptr);
  const BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(s.backend_frees, 1);
  EXPECT_EQ(s.backend_allocations, 2);
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.reserved_bytes, 8 * kMiB);
  EXPECT_EQ(s.cached_bytes, 0u);  // 1 MiB rest stays with the block
  EXPECT_EQ(backend.allocate_calls, 3);
  EXPECT_EQ(backend.held, 8 * kMiB);
  pool.free(q);
}

TEST(BlockPool, OutOfRoomWaitsForPendingBlocksFirst) {
  {
    // The pending block, once its event is waited for, is given back.
    FakeBackend backend(8 * kMiB);
    BlockPool pool(backend);
    void* p = pool.allocate(6 * kMiB, kA);
    pool.record_stream(p, kB);
    pool.free(p);
    void* q = pool.allocate(7 * kMiB, kA);
    EXPECT_EQ(backend.waits, 1);
    EXPECT_EQ(backend.frees, 1);
    EXPECT_EQ(pool.stats().pending_bytes, 0u);
    EXPECT_EQ(pool.stats().reserved_bytes, 8 * kMiB);
    pool.free(q);
  }
  {
    // The pending block fits the request: it is handed out, nothing is given back.
    FakeBackend backend(6 * kMiB);
    BlockPool pool(backend);
    void* p = pool.allocate(6 * kMiB, kA);
    pool.record_stream(p, kB);
    pool.free(p);
    void* q = pool.allocate(5 * kMiB, kA);
    EXPECT_EQ(q, p);
    EXPECT_EQ(backend.waits, 1);
    EXPECT_EQ(backend.frees, 0);
    EXPECT_EQ(pool.stats().retries, 1);
    EXPECT_EQ(pool.stats().backend_allocations, 1);
    pool.free(q);
  }
}

TEST(BlockPool, FinalFailureNamesTheBytesAskedForInUseAndReserved) {
  FakeBackend backend(8 * kMiB);
  BlockPool pool(backend);
  void* p = pool.allocate(6 * kMiB, kA);
  try {
    pool.allocate(4 * kMiB, kA);
    FAIL() << "no Error for 4 MiB more than the backend has";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, testing::HasSubstr("out of memory allocating 4194304 bytes"));
    EXPECT_THAT(message, testing::HasSubstr("6291456 bytes in use"));
    EXPECT_THAT(message, testing::HasSubstr("6291456 bytes reserved"));
  }
  BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 6 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 6 * kMiB);
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.retries, 1);
  void* q = pool.allocate(2 * kMiB, kA);  // what still fits is still served
  EXPECT_NE(q, nullptr);
  pool.free(q);
  pool.free(p);
}

TEST(BlockPool, RejectsPointersItDoesNotOwn) {
  FakeBackend backend;
  BlockPool pool(backend);
  EXPECT_EQ(pool.allocate(0, kA), nullptr);
  pool.free(nullptr);
  pool.record_stream(nullptr, kB);
  int local = 0;
  EXPECT_THROW(pool.free(&local), Error);
  EXPECT_THROW(pool.record_stream(&local, kB), Error);
  void* p = pool.allocate(1024, kA);
  EXPECT_THROW(pool.free(as_bytes(p) + 512), Error);  // inside, but not what allocate returned
  pool.free(p);
  EXPECT_THROW(pool.free(p), Error);
  EXPECT_THROW(pool.record_stream(p, kB), Error);
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
}

TEST(BlockPool, ReleaseCachedGivesBackWhollyFreeSegmentsOnly) {
  FakeBackend backend;
  BlockPool pool(backend);
  void* kept = pool.allocate(4096, kA);  // holds its small segment
  void* big = pool.allocate(4 * kMiB, kA);
  void* used_by_b = pool.allocate(6 * kMiB, kA);
  pool.record_stream(used_by_b, kB);
  pool.free(big);
  pool.free(used_by_b);
  pool.release_cached();  // waits for B's event
  EXPECT_EQ(backend.waits, 1);
  const BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.backend_frees, 2);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.pending_bytes, 0u);
  EXPECT_EQ(backend.held, 2 * kMiB);
  EXPECT_EQ(backend.unreleased_events(), 0u);
  pool.free(kept);
  pool.release_cached();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(backend.held, 0u);
}

// Random allocations, frees, stream uses, completed events, releases and
// running out of room, with the invariants checked after every one.
class RandomRun {
 public:
  RandomRun() : backend_(48 * kMiB), pool_(backend_) {}

  void run(int steps) {
    for (int i = 0; i < steps; ++i) {
      const int op = int(rng_() % 100);
      if (op < 45)
        allocate();
      else if (op < 80)
        free_one();
      else if (op < 88)
        record_use();
      else if (op < 98)
        backend_.complete_oldest(stream(rng_() % 3));
      else
        pool_.release_cached();
      check();
      if (testing::Test::HasFailure()) return;
      const BlockPoolStats s = pool_.stats();
      saw_pending_ = saw_pending_ || s.pending_bytes > 0;
      most_live_ = std::max(most_live_, live_.size());
    }
    while (!live_.empty()) free_at(live_.begin());
    for (int s = 0; s < 3; ++s) backend_.complete_all(stream(size_t(s)));
    pool_.release_cached();
    const BlockPoolStats s = pool_.stats();
    EXPECT_EQ(s.reserved_bytes, 0u);
    EXPECT_EQ(s.segments, 0);
    EXPECT_EQ(backend_.held, 0u);
    EXPECT_EQ(backend_.unreleased_events(), 0u);
    EXPECT_GT(s.backend_allocations, 10);
    EXPECT_GT(out_of_room_, 0);          // the capacity was reached
    EXPECT_GT(s.retries, out_of_room_);  // and a release made room at times
    EXPECT_TRUE(saw_pending_);
    EXPECT_GT(most_live_, 20u);
  }

 private:
  struct Live {
    size_t bytes;
    StreamId stream;
    unsigned char tag;
  };
  static StreamId stream(size_t i) { return StreamId(i + 1); }

  size_t random_size() {
    if (rng_() % 10 < 7) return 1 + size_t(rng_() % (size_t(1) << (1 + rng_() % 20)));  // up to 1 MiB
    return kMiB + 1 + size_t(rng_() % (12 * kMiB));
  }
  // The first and last bytes of an allocation carry its tag: an overlap
  // with another allocation would overwrite them.
  static size_t tagged(size_t bytes) { return std::min<size_t>(bytes, 64); }

  void allocate() {
    const size_t bytes = random_size();
    const StreamId s = stream(rng_() % 3);
    try {
      void* p = pool_.allocate(bytes, s);
      const auto tag = static_cast<unsigned char>(++tags_);
      std::memset(p, tag, tagged(bytes));
      std::memset(as_bytes(p) + bytes - tagged(bytes), tag, tagged(bytes));
      ASSERT_TRUE(live_.emplace(p, Live{bytes, s, tag}).second) << "address handed out twice";
    } catch (const Error&) {
      // Failing is right only if the segment it needed does not fit even
      // with every free segment given back.
      ++out_of_room_;
      const size_t needed = BlockPool::segment_size(BlockPool::round_size(bytes));
      EXPECT_GT(backend_.held + needed, 48 * kMiB);
    }
  }
  void free_one() {
    if (live_.empty()) return;
    auto it = live_.begin();
    std::advance(it, long(rng_() % live_.size()));
    free_at(it);
  }
  void free_at(std::map<void*, Live>::iterator it) {
    const Live& l = it->second;
    const auto* p = static_cast<const unsigned char*>(it->first);
    for (size_t i = 0; i < tagged(l.bytes); ++i) {
      ASSERT_EQ(p[i], l.tag);
      ASSERT_EQ(p[l.bytes - 1 - i], l.tag);
    }
    pool_.free(it->first);
    live_.erase(it);
  }
  void record_use() {
    if (live_.empty()) return;
    auto it = live_.begin();
    std::advance(it, long(rng_() % live_.size()));
    pool_.record_stream(as_bytes(it->first) + rng_() % it->second.bytes, stream(rng_() % 3));
  }

  void check() {
    const BlockPoolStats s = pool_.stats();
    size_t reserved = 0;
    for (auto& [base, bytes] : backend_.segments) reserved += bytes;
    ASSERT_EQ(s.reserved_bytes, reserved);
    ASSERT_EQ(s.segments, int64_t(backend_.segments.size()));
    ASSERT_EQ(s.backend_allocations, backend_.allocations);
    ASSERT_EQ(s.backend_frees, backend_.frees);
    ASSERT_EQ(s.reserved_bytes, s.allocated_bytes + s.cached_bytes + s.pending_bytes);
    size_t allocated = 0, requested = 0;
    const char* end_of_previous = nullptr;
    for (auto& [ptr, l] : live_) {  // by address
      const size_t size = pool_.block_size(ptr);
      ASSERT_GE(size, BlockPool::round_size(l.bytes));
      ASSERT_TRUE(backend_.inside_a_segment(ptr, size));
      if (end_of_previous != nullptr) {
        ASSERT_LE(end_of_previous, as_bytes(ptr)) << "two allocations overlap";
      }
      end_of_previous = as_bytes(ptr) + size;
      allocated += size;
      requested += l.bytes;
    }
    ASSERT_EQ(s.allocated_bytes, allocated);
    ASSERT_EQ(s.requested_bytes, requested);
  }

  std::mt19937_64 rng_{20261203};
  FakeBackend backend_;
  BlockPool pool_;
  std::map<void*, Live> live_;
  unsigned tags_ = 0;
  int out_of_room_ = 0;
  bool saw_pending_ = false;
  size_t most_live_ = 0;
};

TEST(BlockPool, RandomSequencesKeepTheBooksExact) { RandomRun().run(6000); }

TEST(BlockPool, ThreadsShareOnePool) {
  FakeBackend backend;
  BlockPool pool(backend);
  auto work = [&pool](StreamId stream, unsigned seed, bool* ok) {
    std::mt19937 rng(seed);
    std::vector<std::pair<unsigned char*, size_t>> mine;
    for (int i = 0; i < 3000; ++i) {
      if (mine.size() < 16 && rng() % 2 == 0) {
        const size_t bytes = 1 + rng() % (256 * kKiB);
        auto* p = static_cast<unsigned char*>(pool.allocate(bytes, stream));
        std::memset(p, int(seed), bytes);
        mine.emplace_back(p, bytes);
      } else if (!mine.empty()) {
        auto [p, bytes] = mine.back();
        mine.pop_back();
        *ok = *ok && p[0] == seed && p[bytes - 1] == seed;
        pool.free(p);
      }
    }
    for (auto [p, bytes] : mine) pool.free(p);
  };
  bool ok_a = true, ok_b = true;
  std::thread a(work, kA, 7u, &ok_a);
  std::thread b(work, kB, 9u, &ok_b);
  a.join();
  b.join();
  EXPECT_TRUE(ok_a);
  EXPECT_TRUE(ok_b);
  const BlockPoolStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes);
  EXPECT_EQ(s.reserved_bytes, backend.held);
}

}  // namespace
