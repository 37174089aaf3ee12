// One thread's ring of its most recent spans, for the flight recorder. The
// owning thread overwrites the oldest slot; any other thread may read the
// ring at any time (Recorder::recent), so every field is a relaxed atomic
// (plain moves on x86) and a reader detects slots overwritten while it read
// them instead of locking the writer out:
//
//   writer of index i:  claimed = i + 1; release fence; fill slot i % cap;
//                       published = i + 1 (release)
//   reader:             p = published (acquire); copy slots [p - n, p);
//                       acquire fence; c = claimed; keep only indexes >= c - cap
//
// If the reader saw any byte the writer stored after claiming index j, the
// fences make it see claimed >= j + 1, and index j - cap (the slot's previous
// occupant) is dropped. Internal to the recorder.
#pragma once

#include "runtime/telemetry/recorder.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace shardtrain::telemetry::detail {

class SpanRing {
 public:
  explicit SpanRing(size_t capacity) : cap_(capacity), slots_(new Slot[capacity > 0 ? capacity : 1]) {}

  size_t capacity() const { return cap_; }

  // Owner thread only.
  void push(const SpanEvent& e) {
    if (cap_ == 0) return;
    const uint64_t i = published_.load(std::memory_order_relaxed);
    claimed_.store(i + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    Slot& s = slots_[i % cap_];
    s.name.store(e.name, std::memory_order_relaxed);
    s.category.store(e.category, std::memory_order_relaxed);
    s.detail.store(e.detail, std::memory_order_relaxed);
    s.start_s.store(e.start_s, std::memory_order_relaxed);
    s.end_s.store(e.end_s, std::memory_order_relaxed);
    s.bytes.store(e.bytes, std::memory_order_relaxed);
    s.seq.store(e.seq, std::memory_order_relaxed);
    s.tid.store(e.tid, std::memory_order_relaxed);
    published_.store(i + 1, std::memory_order_release);
  }

  // Any thread: appends the newest min(n, capacity) complete spans, oldest first.
  void read_recent(size_t n, std::vector<SpanEvent>& out) const {
    if (cap_ == 0 || n == 0) return;
    const uint64_t p = published_.load(std::memory_order_acquire);
    const uint64_t k = std::min<uint64_t>({n, cap_, p});
    const size_t first_out = out.size();
    for (uint64_t i = p - k; i < p; ++i) {
      const Slot& s = slots_[i % cap_];
      SpanEvent e;
      e.name = s.name.load(std::memory_order_relaxed);
      e.category = s.category.load(std::memory_order_relaxed);
      e.detail = s.detail.load(std::memory_order_relaxed);
      e.start_s = s.start_s.load(std::memory_order_relaxed);
      e.end_s = s.end_s.load(std::memory_order_relaxed);
      e.bytes = s.bytes.load(std::memory_order_relaxed);
      e.seq = s.seq.load(std::memory_order_relaxed);
      e.tid = s.tid.load(std::memory_order_relaxed);
      out.push_back(e);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t c = claimed_.load(std::memory_order_relaxed);
    // Indexes below c - cap may have been overwritten while we copied them.
    const uint64_t valid_from = c > cap_ ? c - cap_ : 0;
    const uint64_t start = p - k;
    if (valid_from > start) {
      const uint64_t torn = std::min<uint64_t>(valid_from - start, k);
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(first_out),
                out.begin() + static_cast<std::ptrdiff_t>(first_out + torn));
    }
  }

 private:
  struct Slot {
    std::atomic<const char*> name{""}, category{""}, detail{nullptr};
    std::atomic<double> start_s{0}, end_s{0};
    std::atomic<int64_t> bytes{-1}, seq{-1};
    std::atomic<int> tid{0};
  };

  const size_t cap_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> claimed_{0}, published_{0};
};

}  // namespace shardtrain::telemetry::detail
