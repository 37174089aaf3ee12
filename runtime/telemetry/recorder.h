// The per-rank span recorder. A span is a named interval (category, start,
// end, a few attributes) on a thread; the trace and the flight recorder are
// made of them. Recording is lock-free on the hot path: each thread appends to
// its own bounded buffer (registered once, under a lock, on the thread's first
// span). Disabled, a span costs one relaxed load and a branch.
//
// Times are now_seconds() (steady clock). Names and categories must be string
// literals (or otherwise outlive the recorder): only the pointer is stored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrain::telemetry {

struct SpanEvent {
  const char* name = "";
  const char* category = "";  // "step", "data", "compute", "comm", "eval", "io", ...
  double start_s = 0, end_s = 0;
  int tid = 0;                   // recorder thread id (0 = first thread to record), or a virtual lane
  int64_t bytes = -1;            // optional attribute (collectives, reads); -1 = none
  int64_t seq = -1;              // optional attribute (collective sequence number, block index, step)
  const char* detail = nullptr;  // optional attribute (algorithm); a literal
};

class Recorder {
 public:
  // This process's recorder (one rank per process).
  static Recorder& instance();

  // Starts recording; `ring_capacity` spans are kept per thread for the
  // flight recorder (older ones are overwritten), `trace` also keeps every
  // span until drained for trace.json. A thread's ring is sized when the
  // thread first records: call enable() before the threads start.
  void enable(size_t ring_capacity = 4096, bool trace = true);
  void disable();
  bool enabled() const;

  // Records a finished span on the calling thread's buffer, with the calling
  // thread's tid unless e.tid is a lane's (below).
  void record(const SpanEvent& e);
  // Records on a named virtual lane (e.g. "comm engine": spans rebuilt from a
  // collective's timestamps on the training thread); returns the lane's tid:
  // set it as SpanEvent::tid and record() keeps it. The same name gives the
  // same lane. Lane tids start at kFirstLaneTid, above any thread's.
  int lane(const char* name);
  static constexpr int kFirstLaneTid = 10000;

  // Spans recorded since the last drain, for the trace (every thread, in
  // no particular order). Call from one thread (the training thread, between
  // steps); other threads keep recording meanwhile.
  std::vector<SpanEvent> drain();
  // The most recent spans of every thread, newest last, at most `n` per
  // thread (the flight recorder). Safe to call from any thread at any time,
  // also while others record (a span being written may be skipped).
  std::vector<SpanEvent> recent(size_t n) const;
  // Thread names by tid (for the trace's thread_name metadata).
  std::vector<std::pair<int, std::string>> threads() const;
  // Names the calling thread in the trace ("train", "loader", ...).
  void name_thread(const std::string& name);

  // Spans the trace lost because more than a million per thread waited
  // undrained (drain() more often); the flight recorder's rings never drop.
  uint64_t dropped() const;
  // A stable pointer for a name built at run time ("wait bucket 3"), usable
  // as a span name; equal strings give the same pointer, kept for the life of
  // the process. Takes a lock: call it once and keep the pointer, not per span.
  static const char* intern(std::string_view s);
};

// Records [construction, destruction) on the calling thread.
class Span {
 public:
  Span(const char* name, const char* category, int64_t seq = -1);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  SpanEvent e_;
  bool on_;
};

}  // namespace shardtrain::telemetry
