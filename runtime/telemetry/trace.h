// trace.json in Chrome trace format (opens in Perfetto and chrome://tracing):
// every rank writes its spans to telemetry/trace-rank-NNNNN.json as they are
// drained; at the end rank 0 merges all ranks into trace.json with pid = rank
// and tid = thread, thread and process names as metadata events.
#pragma once

#include "runtime/telemetry/recorder.h"

#include <cstdio>
#include <string>
#include <vector>

namespace shardtrain::telemetry {

class TraceWriter {
 public:
  // Opens `path` (one rank's events); times are written relative to t0_s.
  TraceWriter(std::string path, int rank, double t0_s);
  ~TraceWriter();  // closes the file (a valid JSON array of events)
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void write(const std::vector<SpanEvent>& spans);
  // Adds thread_name metadata for each (tid, name) and closes the file.
  void close(const std::vector<std::pair<int, std::string>>& threads);

 private:
  std::string path_;
  int rank_;
  double t0_;
  std::FILE* f_ = nullptr;
  bool first_ = true;
};

// Merges the per-rank files into one Chrome trace ({"traceEvents": [...],
// "displayTimeUnit": "ms"}) at `out_path`; returns the number of events.
// A missing or unreadable rank file is an Error naming it.
int64_t merge_traces(const std::vector<std::string>& rank_files, const std::string& out_path);

}  // namespace shardtrain::telemetry
