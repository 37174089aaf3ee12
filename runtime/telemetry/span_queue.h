// One thread's spans waiting to be drained into the trace: a single-producer
// (the owning thread), single-consumer (Recorder::drain) queue of fixed-size
// chunks. The producer fills the tail chunk and publishes each span with a
// release store of the chunk's count; the consumer copies what is published
// and recycles a chunk once the producer has moved past it (next is set).
// No lock and no allocation on the producer's path except one chunk per
// kChunk spans, and usually not even that: the consumer hands back one spare.
//
// Bounded: when more than `max_pending` spans wait (nothing drains), new ones
// are dropped and counted instead of growing without limit. Internal to the
// recorder.
#pragma once

#include "runtime/telemetry/recorder.h"

#include <atomic>
#include <cstdint>
#include <vector>

namespace shardtrain::telemetry::detail {

class SpanQueue {
 public:
  static constexpr uint32_t kChunk = 1024;

  explicit SpanQueue(uint64_t max_pending) : max_pending_(max_pending) { head_ = tail_ = new Chunk; }
  ~SpanQueue() {
    for (Chunk* c = head_; c != nullptr;) {
      Chunk* next = c->next.load(std::memory_order_relaxed);
      delete c;
      c = next;
    }
    delete spare_.load(std::memory_order_relaxed);
  }
  SpanQueue(const SpanQueue&) = delete;
  SpanQueue& operator=(const SpanQueue&) = delete;

  // Producer only.
  void push(const SpanEvent& e) {
    if (produced_ - consumed_.load(std::memory_order_relaxed) >= max_pending_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (tail_count_ == kChunk) {
      Chunk* fresh = spare_.exchange(nullptr, std::memory_order_acquire);
      if (fresh == nullptr) fresh = new Chunk;
      tail_->next.store(fresh, std::memory_order_release);
      tail_ = fresh;
      tail_count_ = 0;
    }
    tail_->events[tail_count_] = e;
    tail_->count.store(++tail_count_, std::memory_order_release);
    ++produced_;
  }

  // Consumer only: appends every span published since the last call.
  void drain(std::vector<SpanEvent>& out) {
    uint64_t taken = 0;
    for (;;) {
      const uint32_t n = head_->count.load(std::memory_order_acquire);
      out.insert(out.end(), head_->events + head_index_, head_->events + n);
      taken += n - head_index_;
      head_index_ = n;
      if (n < kChunk) break;
      Chunk* next = head_->next.load(std::memory_order_acquire);
      if (next == nullptr) break;  // full, but the producer has not moved on yet
      recycle(head_);
      head_ = next;
      head_index_ = 0;
    }
    consumed_.fetch_add(taken, std::memory_order_relaxed);
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Chunk {
    SpanEvent events[kChunk];
    std::atomic<uint32_t> count{0};
    std::atomic<Chunk*> next{nullptr};
  };

  // The producer no longer touches `c`: keep one for it to reuse, free the rest.
  void recycle(Chunk* c) {
    c->count.store(0, std::memory_order_relaxed);
    c->next.store(nullptr, std::memory_order_relaxed);
    Chunk* old = spare_.exchange(c, std::memory_order_release);
    delete old;
  }

  const uint64_t max_pending_;
  // Producer side.
  Chunk* tail_;
  uint32_t tail_count_ = 0;
  uint64_t produced_ = 0;
  // Consumer side.
  Chunk* head_;
  uint32_t head_index_ = 0;
  // Shared.
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<Chunk*> spare_{nullptr};
};

}  // namespace shardtrain::telemetry::detail
