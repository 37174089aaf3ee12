#include "runtime/core/block_pool.h"

#include "runtime/core/error.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <thread>

namespace shardtrain {

void BlockPoolBackend::wait_event(EventId event) {
  while (!event_done(event)) std::this_thread::yield();
}

bool BlockPool::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return std::less<const char*>()(a->ptr, b->ptr);
}

size_t BlockPool::round_size(size_t bytes) { return std::max(kGranule, (bytes + kGranule - 1) / kGranule * kGranule); }

size_t BlockPool::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  return (rounded + kLargeSegmentRound - 1) / kLargeSegmentRound * kLargeSegmentRound;
}

BlockPool::BlockPool(BlockPoolBackend& backend) : backend_(backend) {}

BlockPool::~BlockPool() {
  try {
    for (auto& [stream, events] : pending_)
      for (const PendingEvent& p : events) backend_.release_event(p.event);
    release_free_segments();
  } catch (const std::exception& e) {
    // A destructor has no caller to report to: say so once; what was not
    // given back stays with the backend.
    std::fprintf(stderr, "shardtrain: warning: a block pool could not give its memory back: %s\n", e.what());
  }
  for (Block* head : segments_) {
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

void* BlockPool::allocate(size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  ST_CHECK(bytes <= std::numeric_limits<size_t>::max() - kLargeSegmentRound, "cannot allocate {} bytes", bytes);
  const size_t rounded = round_size(bytes);
  const bool small = rounded <= kSmallRequest;
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) process_events();
  Block* block = find_free(small, stream, rounded);
  if (block == nullptr) block = new_segment(small, stream, rounded, bytes);
  block->state = State::live;  // before the split, so that the rest does not merge back into it
  block = split(block, rounded);
  block->requested = bytes;
  live_.emplace(block->ptr, block);
  stats_.allocated_bytes += block->size;
  stats_.requested_bytes += bytes;
  return block->ptr;
}

void BlockPool::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<const char*>(ptr));
  ST_CHECK(it != live_.end(), "freeing {}, which this pool did not allocate or has freed already", ptr);
  Block* block = it->second;
  // The events first: if recording one fails, the block stays allocated.
  std::vector<EventId> events;
  events.reserve(block->other_streams.size());
  try {
    for (StreamId s : block->other_streams) events.push_back(backend_.record_event(s));
  } catch (...) {
    for (EventId e : events) backend_.release_event(e);
    throw;
  }
  live_.erase(it);
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  block->requested = 0;
  if (events.empty()) {
    make_free(block);
    return;
  }
  block->state = State::pending;
  block->events_left = int(events.size());
  stats_.pending_bytes += block->size;
  for (size_t i = 0; i < events.size(); ++i) pending_[block->other_streams[i]].push_back({events[i], block});
  block->other_streams.clear();
}

void BlockPool::record_stream(const void* ptr, StreamId stream) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  Block* block = live_block_holding(ptr);
  ST_CHECK(block != nullptr, "record_stream: {} is not inside an allocation of this pool", ptr);
  if (stream == block->stream) return;
  auto& others = block->other_streams;
  if (std::find(others.begin(), others.end(), stream) == others.end()) others.push_back(stream);
}

void BlockPool::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  wait_all_events();
  release_free_segments();
}

BlockPoolStats BlockPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t BlockPool::block_size(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Block* block = live_block_holding(ptr);
  ST_CHECK(block != nullptr, "{} is not inside an allocation of this pool", ptr);
  return block->size;
}

BlockPool::Block* BlockPool::find_free(bool small, StreamId stream, size_t rounded) {
  FreeBlocks& blocks = free_blocks(small);
  Block key;
  key.stream = stream;
  key.size = rounded;
  auto it = blocks.lower_bound(&key);
  if (it == blocks.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  blocks.erase(it);
  stats_.cached_bytes -= block->size;
  return block;
}

// A new segment as one block for the request; or, when the backend has no
// room and waiting for the pending blocks freed one that fits, that block.
BlockPool::Block* BlockPool::new_segment(bool small, StreamId stream, size_t rounded, size_t bytes) {
  const size_t size = segment_size(rounded);
  void* ptr = backend_.allocate_segment(size);
  if (ptr == nullptr) {
    // No room: whatever the other streams still hold from us, and every
    // segment we keep unused, may make some.
    ++stats_.retries;
    wait_all_events();
    if (Block* block = find_free(small, stream, rounded)) return block;
    release_free_segments();
    ptr = backend_.allocate_segment(size);
  }
  ST_CHECK(ptr != nullptr,
           "out of memory allocating {} bytes (a new segment of {} bytes): {} bytes in use, {} bytes reserved after "
           "giving back every free segment",
           bytes, size, stats_.allocated_bytes, stats_.reserved_bytes);
  auto* block = new Block;
  block->stream = stream;
  block->small = small;
  block->ptr = static_cast<char*>(ptr);
  block->size = size;
  segments_.insert(block);
  stats_.reserved_bytes += size;
  ++stats_.segments;
  ++stats_.backend_allocations;
  return block;
}

// Cuts `rounded` bytes off the front of a block taken out of the free set;
// the rest goes back to it.
BlockPool::Block* BlockPool::split(Block* block, size_t rounded) {
  const size_t rest = block->size - rounded;
  const bool useful = block->small ? rest >= kGranule : rest > kSmallRequest;
  if (!useful) return block;
  auto* remainder = new Block;
  remainder->stream = block->stream;
  remainder->small = block->small;
  remainder->ptr = block->ptr + rounded;
  remainder->size = rest;
  remainder->prev = block;
  remainder->next = block->next;
  if (block->next != nullptr) block->next->prev = remainder;
  block->next = remainder;
  block->size = rounded;
  make_free(remainder);
  return block;
}

// Merges the block with its free neighbours and puts the result in the free set.
void BlockPool::make_free(Block* block) {
  stats_.cached_bytes += block->size;
  FreeBlocks& blocks = free_blocks(block->small);
  block->state = State::free;
  if (Block* prev = block->prev; prev != nullptr && prev->state == State::free) {
    blocks.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && next->state == State::free) {
    blocks.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  blocks.insert(block);
}

// A stream's events complete in order, so each queue is read up to its first
// event still running.
void BlockPool::process_events() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::deque<PendingEvent>& events = it->second;
    while (!events.empty() && backend_.event_done(events.front().event)) {
      const PendingEvent done = events.front();
      events.pop_front();
      backend_.release_event(done.event);
      if (--done.block->events_left == 0) {
        stats_.pending_bytes -= done.block->size;
        make_free(done.block);
      }
    }
    it = events.empty() ? pending_.erase(it) : std::next(it);
  }
}

void BlockPool::wait_all_events() {
  for (auto& [stream, events] : pending_)
    for (const PendingEvent& p : events) backend_.wait_event(p.event);
  process_events();
}

void BlockPool::release_free_segments() {
  for (FreeBlocks* blocks : {&small_free_, &large_free_}) {
    for (auto it = blocks->begin(); it != blocks->end();) {
      Block* block = *it;
      if (block->prev != nullptr || block->next != nullptr) {
        ++it;
        continue;
      }
      backend_.free_segment(block->ptr, block->size);
      it = blocks->erase(it);
      stats_.reserved_bytes -= block->size;
      stats_.cached_bytes -= block->size;
      --stats_.segments;
      ++stats_.backend_frees;
      segments_.erase(block);
      delete block;
    }
  }
}

BlockPool::Block* BlockPool::live_block_holding(const void* ptr) const {
  const auto* p = static_cast<const char*>(ptr);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) return nullptr;
  Block* block = std::prev(it)->second;
  return std::less<const char*>()(p, block->ptr + block->size) ? block : nullptr;
}

}  // namespace shardtrain
