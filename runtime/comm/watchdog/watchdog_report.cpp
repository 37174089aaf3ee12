#include "runtime/comm/watchdog/watchdog_report.h"

#include <fmt/format.h>

namespace shardtrain::comm {

std::string describe_op(const OpRecord& op, bool with_algorithm) {
  std::string s = fmt::format("{} #{} ({} bytes, {}", op_name(op.op), op.seq, op.bytes, dtype_name(op.dtype));
  if (op.op == OpCode::broadcast) s += fmt::format(", root {}", op.root);
  if (with_algorithm && op.algorithm[0]) s += fmt::format(", {}", op.algorithm);
  return s + ")";
}

namespace {

// What rank `r` is doing, if it has not arrived at `mine`; nullopt if it has.
std::optional<std::string> absence(const OpRecord& mine, const std::optional<MonitorSnapshot>& peer) {
  if (!peer) return "no answer: exited, dead, or its process is hung";
  const MonitorSnapshot& s = *peer;
  const int64_t seq = mine.seq;
  auto running = [&] { return fmt::format("in {} for {:.1f} s", describe_op(s.current), s.running_s); };
  if (s.issued <= seq) {  // has not issued it yet
    if (s.running >= 0) return running();
    if (s.completed == 0) return std::string("no collective issued yet");
    return fmt::format("last completed #{}, nothing in flight", s.completed - 1);
  }
  if (const OpRecord* r = s.find(seq); r && !r->matches(mine)) return fmt::format("issued {} instead", describe_op(*r));
  if (s.running == seq || s.completed > seq) return std::nullopt;
  if (s.running >= 0) return fmt::format("{}; #{} queued behind it", running(), seq);
  return fmt::format("issued #{}, not started", seq);
}

std::string who(const StuckCollective& stuck, int r) {
  const bool same = stuck.world_ranks.empty() || stuck.world_ranks[size_t(r)] == r;
  return same ? fmt::format("{}", r) : fmt::format("{} (world rank {})", r, stuck.world_ranks[size_t(r)]);
}

}  // namespace

std::string describe(const StuckCollective& stuck, const std::vector<std::optional<MonitorSnapshot>>& peers) {
  std::string missing, arrived;
  for (int r = 0; r < stuck.size; ++r) {
    if (r == stuck.rank) continue;
    const std::optional<MonitorSnapshot> none;
    const auto& peer = size_t(r) < peers.size() ? peers[size_t(r)] : none;
    if (auto why = absence(stuck.op, peer)) {
      missing += fmt::format("{}{} ({})", missing.empty() ? "" : ", ", who(stuck, r), *why);
    } else {
      arrived += fmt::format("{}{}", arrived.empty() ? "" : ", ", who(stuck, r));
    }
  }
  std::string line =
      fmt::format("shardtrain: watchdog: {} on communicator '{}' (rank {} of {}) {}", describe_op(stuck.op, true),
                  stuck.comm, who(stuck, stuck.rank), stuck.size, stuck.what);
  if (!missing.empty())
    line += fmt::format("; ranks that never arrived: {}", missing);
  else
    line += "; every rank arrived (stuck in the transport: check the links between the ranks)";
  if (!arrived.empty()) line += fmt::format("; arrived: {}", arrived);
  return line + "; aborting the job";
}

}  // namespace shardtrain::comm
