// trace.json in Chrome trace format (opens in Perfetto and chrome://tracing):
// every rank writes its spans to telemetry/trace-rank-NNNNN.json as they are
// drained; at the end rank 0 merges all ranks into trace.json with pid = rank
// and tid = thread, thread and process names as metadata events.
#pragma once

#include "runtime/core/output_file.h"
#include "runtime/telemetry/recorder.h"

#include <string>
#include <vector>

namespace shardtrain::telemetry {

// One rank's file: a JSON array, one event per line: process_name "rank N"
// metadata first, then complete events ("ph": "X", ts and dur in
// microseconds from t0_s, pid = rank, tid = SpanEvent::tid, args bytes and
// seq when set, and the detail as "algorithm" for "comm" spans, "detail"
// otherwise), then thread_name metadata when closed. Not thread-safe: one
// writer per rank, fed from the thread that drains the recorder.
class TraceWriter {
 public:
  // Opens `path` (one rank's events); times are written relative to t0_s.
  // An Error names the file when it cannot be created.
  TraceWriter(std::string path, int rank, double t0_s);
  ~TraceWriter();  // closes the file if close() was not called (a valid JSON array, no thread names)
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void write(const std::vector<SpanEvent>& spans);
  // Adds thread_name metadata for each (tid, name) and closes the file.
  // Writes after close are ignored. A write that fails (disk full) warns
  // once, naming the file, and the rank's trace ends there.
  void close(const std::vector<std::pair<int, std::string>>& threads);

 private:
  std::string path_;
  int rank_;
  double t0_;
  OptionalFile file_;
  bool first_ = true;
};

// Merges the per-rank files into one Chrome trace ({"traceEvents": [...],
// "displayTimeUnit": "ms"}) at `out_path`; returns the number of events
// (metadata included). Streams: one event in memory at a time. Written to a
// temporary file renamed into place, so out_path is never half written.
// A missing, unreadable or corrupt rank file is an Error naming it.
int64_t merge_traces(const std::vector<std::string>& rank_files, const std::string& out_path);

}  // namespace shardtrain::telemetry
