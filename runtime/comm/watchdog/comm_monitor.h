// What one communicator is doing, as the watchdog sees it: the collectives
// issued (the last few remembered), which one runs and since when, how many
// completed. The issuing thread and the progress engine write it; the
// watchdog reads it on its own thread, and sends snapshots to other ranks
// (plain fixed-size structs: every rank runs the same binary).
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace shardtrain::comm {

enum class OpCode : uint8_t { allreduce, reduce_scatter, allgather, broadcast, barrier };
const char* op_name(OpCode op);

// One issued collective.
struct OpRecord {
  int64_t seq = -1;
  int64_t bytes = 0;  // payload bytes of this rank (Work::bytes)
  int32_t root = -1;  // broadcast's root
  OpCode op = OpCode::barrier;
  DType dtype = DType::f32;
  char algorithm[14] = {};  // "mpi", "ring", "hierarchical", "local"

  // The same collective on every rank has the same op, size, dtype and root.
  bool matches(const OpRecord& o) const {
    return seq == o.seq && op == o.op && bytes == o.bytes && dtype == o.dtype && root == o.root;
  }
};

struct MonitorSnapshot {
  static constexpr int kHistory = 16;
  char name[16] = {};
  int64_t issued = 0;          // collectives issued: the next is #issued
  int64_t completed = 0;       // completed, in order: #0 .. #completed-1
  int64_t running = -1;        // the sequence number executing now, or -1
  double running_s = 0;        // for how long
  OpRecord current;            // the collective executing now (when running >= 0)
  OpRecord history[kHistory];  // the last issued, at [seq % kHistory]

  // The record of #seq if it is still remembered, else nullptr.
  const OpRecord* find(int64_t seq) const;
};

class CommMonitor {
 public:
  CommMonitor(std::string name, int rank, int size, std::vector<int> world_ranks, double timeout_s);

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int world_rank(int rank) const { return world_ranks_[size_t(rank)]; }
  double timeout_s() const { return timeout_s_; }

  void issued(const OpRecord& op);               // the issuing thread
  void started(const OpRecord& op, double now);  // the progress engine
  void finished(const OpRecord& op);
  MonitorSnapshot snapshot(double now) const;

 private:
  const std::string name_;
  const int rank_, size_;
  const std::vector<int> world_ranks_;
  const double timeout_s_;
  // The issuing thread and the engine write under separate locks, so that
  // they do not contend on every collective; a snapshot takes both.
  mutable std::mutex issue_mu_, run_mu_;
  MonitorSnapshot state_;
  double started_at_ = 0;
};

}  // namespace shardtrain::comm
