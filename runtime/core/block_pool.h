// A stream-ordered caching allocator's logic, on the semantics of PyTorch's
// CUDACachingAllocator, over an injected backend (the device's malloc, free
// and events) so that it is tested on the CPU; kernels/cuda/caching_allocator
// runs it over cudaMalloc, cudaFree and CUDA events.
//
// Memory comes from the backend in segments and is handed out as blocks cut
// from them. A request is rounded up to 512 bytes. Requests of at most 1 MiB
// come from the small pool, whose segments are 2 MiB; larger ones from the
// large pool, whose segments are the request rounded up to 2 MiB. A request
// takes the smallest free block that fits (best fit) of its pool and its
// stream, and a fitting block is split when the rest is still useful (at
// least 512 bytes in the small pool, more than 1 MiB in the large one: a
// smaller rest could only serve small requests, which never come from
// there). A freed block merges with the free blocks next to it in its
// segment, so that a segment whose blocks are all freed serves a request as
// large as itself again.
//
// Streams: a block belongs to the stream it was allocated on, and only that
// stream's requests reuse it after its free, at once: work the stream issues
// later runs after the work that used the block. A block also used by other
// streams (record_stream) is not reused until an event recorded on each of
// them when it was freed has completed ("pending" until then); those events
// are queried on later allocations, never waited for, except before giving
// up on an allocation and in release_cached.
//
// When the backend has no room for a new segment, the pool waits for the
// pending blocks, gives every segment that is wholly free back and asks once
// more; then it throws an Error with the bytes asked for, in use and
// reserved. One mutex serializes everything, the backend's calls included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace shardtrain {

// Opaque to the pool: a cudaStream_t or a cudaEvent_t on the GPU, numbers in
// tests.
enum class StreamId : std::uintptr_t {};
enum class EventId : std::uintptr_t {};

// What the pool gets its memory and its events from. Called with the pool's
// lock held, so one call at a time.
class BlockPoolBackend {
 public:
  virtual ~BlockPoolBackend() = default;
  // `bytes` of memory, or nullptr when there is no room for them; any other
  // failure throws.
  virtual void* allocate_segment(size_t bytes) = 0;
  virtual void free_segment(void* ptr, size_t bytes) = 0;
  // An event that completes once all the work issued to `stream` so far has.
  // Events recorded on one stream complete in the order they were recorded.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_done(EventId event) = 0;
  // Blocks until the event has completed; by default by asking event_done.
  virtual void wait_event(EventId event);
  // The pool asks nothing more about it (a backend may reuse it).
  virtual void release_event(EventId event) = 0;
};

struct BlockPoolStats {
  size_t reserved_bytes = 0;        // held from the backend: allocated + cached + pending
  size_t allocated_bytes = 0;       // blocks in use (rounded sizes)
  size_t requested_bytes = 0;       // what their allocate() calls asked for
  size_t cached_bytes = 0;          // free blocks, reusable at once on their stream
  size_t pending_bytes = 0;         // freed blocks waiting for other streams' events
  int64_t segments = 0;             // held from the backend now
  int64_t backend_allocations = 0;  // segments obtained since the pool was made
  int64_t backend_frees = 0;        // segments given back since then
  int64_t retries = 0;              // allocations that found no room and released the cache
};

class BlockPool {
 public:
  static constexpr size_t kGranule = 512;                        // request rounding, smallest block
  static constexpr size_t kSmallRequest = size_t(1) << 20;       // larger requests use the large pool
  static constexpr size_t kSmallSegment = size_t(2) << 20;       // the small pool's segment size
  static constexpr size_t kLargeSegmentRound = size_t(2) << 20;  // the large pool's segments round to this

  explicit BlockPool(BlockPoolBackend& backend);
  // Gives every wholly free segment back, without waiting for pending
  // blocks; the segments of blocks still allocated or pending stay with the
  // backend.
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // nullptr for 0 bytes. Throws an Error when the backend has no room.
  void* allocate(size_t bytes, StreamId stream);
  // `ptr` as allocate returned it; nullptr is ignored.
  void free(void* ptr);
  // Marks the live allocation holding `ptr` (any address inside it) as used
  // by `stream` too: its free then waits for the work issued to `stream`
  // before the free. Its own stream is ignored, and so is nullptr.
  void record_stream(const void* ptr, StreamId stream);
  // Waits for the pending blocks, then gives every wholly free segment back.
  void release_cached();

  BlockPoolStats stats() const;
  // The size of the live block holding `ptr` (>= what was asked for).
  size_t block_size(const void* ptr) const;

  static size_t round_size(size_t bytes);
  static size_t segment_size(size_t rounded);

 private:
  enum class State { live, free, pending };
  struct Block {
    StreamId stream{};
    bool small = false;  // which pool its segment belongs to
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;
    State state = State::free;
    Block* prev = nullptr;  // the blocks before and after it in its segment
    Block* next = nullptr;
    std::vector<StreamId> other_streams;  // record_stream's, while live
    int events_left = 0;                  // while pending
  };
  // Ordered by stream, then size, then address: lower_bound finds the best fit.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeBlocks = std::set<Block*, BlockOrder>;
  struct PendingEvent {
    EventId event;
    Block* block;
  };

  FreeBlocks& free_blocks(bool small) { return small ? small_free_ : large_free_; }
  Block* find_free(bool small, StreamId stream, size_t rounded);
  Block* new_segment(bool small, StreamId stream, size_t rounded, size_t bytes);
  Block* split(Block* block, size_t rounded);
  void make_free(Block* block);
  void process_events();
  void wait_all_events();
  void release_free_segments();
  Block* live_block_holding(const void* ptr) const;

  BlockPoolBackend& backend_;
  mutable std::mutex mu_;
  FreeBlocks small_free_, large_free_;
  std::set<Block*> segments_;           // each segment's first block (never merged away)
  std::map<const char*, Block*> live_;  // by address
  std::map<StreamId, std::deque<PendingEvent>> pending_;
  BlockPoolStats stats_;
};

}  // namespace shardtrain
