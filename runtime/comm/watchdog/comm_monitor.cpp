#include "runtime/comm/watchdog/comm_monitor.h"

#include <algorithm>
#include <cstring>

namespace shardtrain::comm {

const char* op_name(OpCode op) {
  switch (op) {
    case OpCode::allreduce: return "allreduce";
    case OpCode::reduce_scatter: return "reduce_scatter";
    case OpCode::allgather: return "allgather";
    case OpCode::broadcast: return "broadcast";
    case OpCode::barrier: return "barrier";
  }
  return "?";
}

const OpRecord* MonitorSnapshot::find(int64_t seq) const {
  if (seq < 0) return nullptr;
  const OpRecord& r = history[seq % kHistory];
  return r.seq == seq ? &r : nullptr;
}

CommMonitor::CommMonitor(std::string name, int rank, int size, std::vector<int> world_ranks, double timeout_s)
    : name_(std::move(name)), rank_(rank), size_(size), world_ranks_(std::move(world_ranks)), timeout_s_(timeout_s) {
  std::strncpy(state_.name, name_.c_str(), sizeof(state_.name) - 1);
}

void CommMonitor::issued(const OpRecord& op) {
  std::lock_guard lock(issue_mu_);
  state_.history[op.seq % MonitorSnapshot::kHistory] = op;
  state_.issued = std::max(state_.issued, op.seq + 1);
}

void CommMonitor::started(const OpRecord& op, double now) {
  std::lock_guard lock(run_mu_);
  state_.running = op.seq;
  state_.current = op;
  started_at_ = now;
}

void CommMonitor::finished(const OpRecord& op) {
  std::lock_guard lock(run_mu_);
  state_.running = -1;
  state_.completed = op.seq + 1;
}

MonitorSnapshot CommMonitor::snapshot(double now) const {
  std::scoped_lock lock(issue_mu_, run_mu_);
  MonitorSnapshot s = state_;
  s.running_s = s.running >= 0 ? now - started_at_ : 0;
  return s;
}

}  // namespace shardtrain::comm
