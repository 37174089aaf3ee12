#include "runtime/telemetry/op_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace shardtrain::telemetry {

using json = nlohmann::json;

namespace {

json row(const std::string& name, const char* part, double s, double calls, double step_s) {
  return {{"name", name}, {"part", part}, {"s", s}, {"calls", calls}, {"frac", step_s > 0 ? s / step_s : 0.0}};
}

}  // namespace

json op_breakdown(const std::vector<StepRecord>& records) {
  std::vector<const StepRecord*> timed;
  for (const StepRecord& r : records)
    if (!r.ops.empty()) timed.push_back(&r);
  if (timed.size() > 1) timed.erase(timed.begin());
  if (timed.empty()) return json::object();

  std::map<std::string, std::pair<double, double>> ops;  // name -> (seconds, calls), summed
  double step = 0, data = 0, h2d = 0, exposed = 0, peers = 0;
  for (const StepRecord* r : timed) {
    for (const OpTime& o : r->ops) {
      ops[o.op].first += o.s;
      ops[o.op].second += double(o.calls);
    }
    step += r->step_s;
    data += r->data_wait_s;
    h2d += r->h2d_s;
    exposed += r->comm_exposed_s;
    peers += r->blocked_on_peers_s;
  }
  const double n = double(timed.size());
  step /= n;
  std::vector<std::pair<std::string, std::pair<double, double>>> sorted(ops.begin(), ops.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  json rows = json::array();
  double accounted = 0;
  for (const auto& [name, t] : sorted) {
    rows.push_back(row(name, "op", t.first / n, t.second / n, step));
    accounted += t.first / n;
  }
  const std::pair<const char*, double> parts[] = {{"data wait", data / n},
                                                  {"input copy", h2d / n},
                                                  {"communication (exposed)", exposed / n},
                                                  {"blocked on peers", peers / n}};
  for (const auto& [name, s] : parts) {
    rows.push_back(row(name, "step", s, 0, step));
    accounted += s;
  }
  // Negative where a GPU's kernels ran while the host waited for a
  // collective (both counted): shown as 0, the overlap named by "accounted".
  rows.push_back(row("other (host, gaps)", "step", std::max(0.0, step - accounted), 0, step));
  return {{"steps", int64_t(timed.size())}, {"step_s", step}, {"accounted_s", accounted}, {"rows", rows}};
}

std::string op_breakdown_text(const json& breakdown, int rank) {
  if (!breakdown.contains("rows")) return "";
  const double step = breakdown["step_s"].get<double>();
  std::string out = fmt::format("op time (rank {}, mean of {} steps, {:.3f} ms a step):", rank,
                                breakdown["steps"].get<int64_t>(), step * 1e3);
  for (const json& r : breakdown["rows"]) {
    const double s = r["s"].get<double>(), frac = r["frac"].get<double>();
    if (r["part"] == "step" && s <= 0) continue;
    const auto bar = size_t(std::lround(std::clamp(frac, 0.0, 1.0) * 30.0));
    std::string line = fmt::format("{:<24} {:9.3f} ms {:5.1f}%", r["name"].get<std::string>(), s * 1e3, frac * 100.0);
    if (bar > 0 || r["part"] == "op") line += " " + std::string(bar, '#');
    if (r["part"] == "op") line += fmt::format("{} {:.0f} calls", std::string(30 - bar, ' '), r["calls"].get<double>());
    out += "\n  " + line;
  }
  return out;
}

}  // namespace shardtrain::telemetry
