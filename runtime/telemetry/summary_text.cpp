// The printed summary (also summary.txt), made from summary.json's content so
// that it can be rebuilt from a run directory: a line for the run, a per-rank
// table, a line per straggler.
#include "runtime/telemetry/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace shardtrain::telemetry {
namespace {

using nlohmann::json;

// Milliseconds with a precision that suits the size (a 0.31 ms MLP step, a 91.2 ms CNN step).
std::string ms(double seconds) {
  const double v = seconds * 1e3;
  return std::abs(v) < 10 ? fmt::format("{:.2f}", v) : fmt::format("{:.1f}", v);
}

std::string bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.0f} B", b);
}

double num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

double across_median(const json& s, const char* key) {
  auto a = s.find("across_ranks");
  if (a == s.end() || !a->contains(key)) return 0;
  return num((*a)[key], "median");
}

std::string run_line(const json& s) {
  const int64_t ranks = s.value("ranks", int64_t{0}), steps = s.value("steps", int64_t{0});
  std::string line =
      fmt::format("telemetry: {} rank{}, {} step{}", ranks, ranks == 1 ? "" : "s", steps, steps == 1 ? "" : "s");
  if (steps == 0) return line + " (no step records)";
  std::vector<double> p95;
  for (const auto& r : s.value("per_rank", json::array())) p95.push_back(num(r, "step_time_p95_s"));
  std::sort(p95.begin(), p95.end());
  line += fmt::format("; step {} ms median (p95 up to {} ms); AU {:.1f}% median, {:.1f}% min; {:.1f} samples/s",
                      ms(across_median(s, "step_time_median_s")), ms(p95.empty() ? 0 : p95.back()),
                      100 * num(s, "au_median"), 100 * num(s, "au_min"), num(s, "samples_per_s"));
  const json io = s.value("io", json::object());
  if (num(io, "bytes") > 0)
    line += fmt::format("; read {} in {:.0f} requests ({:.1f} s)", bytes(num(io, "bytes")), num(io, "requests"),
                        num(io, "read_s"));
  return line;
}

// Data-parallel runs: how much gradient communication there was and how long
// the steps waited for it (the rest ran under backward). Totals over ranks,
// so one slow rank does not hide in a median. The wait can exceed the
// collectives' own time: it also holds the time a collective took to start
// (its communication thread not yet scheduled, on an oversubscribed node).
std::string comm_line(const json& s) {
  double comm = 0, exposed = 0, steps = 0;
  for (const auto& r : s.value("per_rank", json::array())) {
    const double n = num(r, "steps");
    comm += num(r, "comm_s");
    exposed += num(r, "comm_exposed_frac") * num(r, "step_time_mean_s") * n;
    steps += n;
  }
  if (comm <= 0 || steps <= 0) return "";
  std::string line = fmt::format("communication {} ms per step per rank; steps waited {} ms on it", ms(comm / steps),
                                 ms(exposed / steps));
  if (exposed <= comm) return line + fmt::format(" ({:.1f}% exposed, the rest overlapped)\n", 100 * exposed / comm);
  return line + " (more than its duration: collectives also waited to start)\n";
}

// At most 16 rows: beyond that, the ranks with the longest busy time (the
// interesting ones); summary.json has them all.
std::string rank_table(const json& s) {
  std::vector<json> rows;
  for (const auto& r : s.value("per_rank", json::array())) rows.push_back(r);
  const size_t total = rows.size();
  constexpr size_t kMaxRows = 16, kShownWhenMany = 8;
  if (total > kMaxRows) {
    std::stable_sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
      return num(a, "busy_time_median_s") > num(b, "busy_time_median_s");
    });
    rows.resize(kShownWhenMany);
  }
  std::string out = fmt::format("{:>6} {:>9} {:>9} {:>6} {:>7} {:>7} {:>8}\n", "rank", "step ms", "busy ms", "AU %",
                                "data %", "comm %", "peers %");
  for (const auto& r : rows)
    out += fmt::format("{:>6} {:>9} {:>9} {:>6.1f} {:>7.1f} {:>7.1f} {:>8.1f}\n", r.value("rank", 0),
                       ms(num(r, "step_time_median_s")), ms(num(r, "busy_time_median_s")), 100 * num(r, "au"),
                       100 * num(r, "data_wait_frac"), 100 * num(r, "comm_exposed_frac"),
                       100 * num(r, "blocked_on_peers_frac"));
  if (total > rows.size())
    out += fmt::format("  ... {} more ranks (the {} with the longest busy time shown; all in summary.json)\n",
                       total - rows.size(), rows.size());
  return out;
}

std::string straggler_line(const json& st) {
  const std::string cause = st.value("cause", std::string("compute"));
  const json excess = st.value("excess_s", json::object());
  std::string parts = fmt::format("{} +{} ms/step", cause, ms(num(excess, cause.c_str())));
  // Other components that also grew noticeably (a tenth of a millisecond).
  for (const auto& [name, value] : excess.items())
    if (name != cause && value.is_number() && value.get<double>() >= 1e-4)
      parts += fmt::format(", {} +{} ms/step", name, ms(value.get<double>()));
  return fmt::format("straggler: rank {} (busy {:.0f}% above the median: {})\n", st.value("rank", 0),
                     100 * num(st, "excess_frac"), parts);
}

}  // namespace

std::string summary_text(const json& summary) {
  std::string out = run_line(summary) + "\n";
  if (summary.value("steps", int64_t{0}) == 0) return out;
  out += comm_line(summary);
  out += rank_table(summary);
  const json stragglers = summary.value("stragglers", json::array());
  if (stragglers.empty())
    out += fmt::format("no stragglers (threshold {:g}%)\n", 100 * num(summary, "straggler_threshold"));
  for (const auto& st : stragglers) out += straggler_line(st);
  return out;
}

}  // namespace shardtrain::telemetry
