#include "runtime/doctor/doctor.h"

#include "runtime/doctor/checks.h"
#include "runtime/doctor/int_ranges.h"
#include "runtime/doctor/rank_binding.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

namespace shardtrain::doctor {
namespace {

std::string host_name(const SysRoot& sys) {
  if (auto h = sys.read("/proc/sys/kernel/hostname"); h && !h->empty()) return *h;
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : "unknown";
}

void render_finding(std::string& out, const Finding& f) {
  out += fmt::format("  {:<5} {:<14} {}\n", name_of(f.verdict), f.check, f.detail);
  if (!f.advice.empty() && f.verdict != Verdict::ok) out += fmt::format("  {:<5} {:<14} -> {}\n", "", "", f.advice);
}

}  // namespace

NodeReport probe_node(const ProbeOptions& options, const Environment& env, int rank) {
  const SysRoot sys(options.sysroot);
  const bool live = sys.root() == "/";
  const bool ask_cuda = live && cuda_backend_built();
  std::string cuda_why;
  auto cuda = ask_cuda ? cuda_devices(&cuda_why) : std::vector<AcceleratorInfo>{};
  const ProbeContext ctx{.sys = sys,
                         .env = env,
                         .rdma = scan_rdma_devices(sys),
                         .gpus = scan_nvidia_gpus(sys),
                         .cuda_asked = ask_cuda,
                         .cuda = std::move(cuda),
                         .cuda_why = cuda_why,
                         .live = live,
                         .thorough = options.thorough,
                         .data_path = options.data_path};
  NodeReport r;
  r.host = host_name(sys);
  r.rank = rank;
  check_rdma(ctx, r);
  check_gpus(ctx, r);
  check_mpi(ctx, r);
  check_nccl(ctx, r);
  check_data_storage(ctx, r);
  if (ctx.live) {  // where this rank runs: shardrun --bind's placement, or the launcher's
    const auto placed = env.find("SHARDTRAIN_BINDING");
    r.facts["binding"] = {{"cpus", current_cpus()}, {"placed", placed == env.end() ? "" : placed->second}};
  }
  return r;
}

Verdict ClusterReport::worst() const {
  Verdict w = Verdict::ok;
  for (const auto& n : nodes) w = std::max(w, n.report.worst());
  for (const auto& f : across) w = std::max(w, f.verdict);
  return w;
}

int ClusterReport::count(Verdict v) const {
  int c = 0;
  for (const auto& n : nodes)
    for (const auto& f : n.report.findings) c += f.verdict == v;
  for (const auto& f : across) c += f.verdict == v;
  return c;
}

ClusterReport combine(const std::vector<NodeReport>& reports) {
  ClusterReport out;
  std::map<std::string, size_t> by_host;
  for (const NodeReport& r : reports) {
    auto [it, added] = by_host.emplace(r.host, out.nodes.size());
    if (added) out.nodes.push_back({r.host, {}, r});
    out.nodes[it->second].ranks.push_back(r.rank);
  }
  if (out.nodes.size() < 2) return out;
  std::set<std::string> keys;
  for (const auto& n : out.nodes)
    for (const auto& [k, v] : n.report.fingerprint) keys.insert(k);
  for (const std::string& key : keys) {
    std::map<std::string, std::vector<std::string>> hosts_by_value;
    for (const auto& n : out.nodes) {
      const auto it = n.report.fingerprint.find(key);
      hosts_by_value[it == n.report.fingerprint.end() ? "" : it->second].push_back(n.host);
    }
    if (hosts_by_value.size() < 2) continue;
    size_t largest = 0, with_largest = 0;
    for (const auto& [v, hosts] : hosts_by_value) largest = std::max(largest, hosts.size());
    for (const auto& [v, hosts] : hosts_by_value) with_largest += hosts.size() == largest;
    std::string detail = key + " differs across nodes:";
    std::string odd;
    for (const auto& [v, hosts] : hosts_by_value) {
      std::string names;
      for (const auto& h : hosts) names += (names.empty() ? "" : ", ") + h;
      detail += fmt::format(" \"{}\" on {};", v.empty() ? "(none)" : v, names);
      if (hosts.size() < largest || with_largest > 1) odd += (odd.empty() ? "" : ", ") + names;
    }
    detail.pop_back();
    out.across.push_back(
        {"nodes-differ", Verdict::fail, detail,
         with_largest > 1 ? "the nodes disagree: check each one" : "check the odd node(s) out: " + odd});
  }
  return out;
}

std::vector<NodeReport> gather_reports(const NodeReport& mine, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::string text = to_json(mine).dump();
  const int length = int(text.size());
  std::vector<int> lengths(size_t(size), 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm);
  std::vector<int> offsets(size_t(size), 0);
  for (int i = 1; i < size; ++i) offsets[size_t(i)] = offsets[size_t(i - 1)] + lengths[size_t(i - 1)];
  std::string all(rank == 0 ? size_t(offsets.back() + lengths.back()) : 0, '\0');
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm);
  std::vector<NodeReport> out;
  if (rank != 0) return out;
  for (int i = 0; i < size; ++i)
    out.push_back(node_report_from_json(
        nlohmann::json::parse(all.substr(size_t(offsets[size_t(i)]), size_t(lengths[size_t(i)])))));
  return out;
}

std::string summary_line(const ClusterReport& report) {
  size_t ranks = 0;
  for (const auto& n : report.nodes) ranks += n.ranks.size();
  std::set<std::string> checks;
  for (const auto& n : report.nodes)
    for (const auto& f : n.report.findings)
      if (f.verdict != Verdict::ok) checks.insert(f.check);
  for (const auto& f : report.across) checks.insert(f.check);
  std::string names;
  for (const auto& c : checks) names += (names.empty() ? "" : ", ") + c;
  return fmt::format("{} node{}, {} rank{}: {} fail, {} warn{}", report.nodes.size(),
                     report.nodes.size() == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s", report.count(Verdict::fail),
                     report.count(Verdict::warn), names.empty() ? "" : " (" + names + ")");
}

std::string render_text(const ClusterReport& report) {
  std::string out = "shardtrain doctor: " + summary_line(report) + "\n";
  for (size_t i = 0; i < report.nodes.size(); ++i) {
    const NodeGroup& n = report.nodes[i];
    out += fmt::format("\nnode {} (rank{} {})\n", n.host, n.ranks.size() == 1 ? "" : "s", int_ranges(n.ranks));
    bool shown = false;
    for (const Finding& f : n.report.findings)
      if (i == 0 || f.verdict != Verdict::ok) {
        render_finding(out, f);
        shown = true;
      }
    if (i > 0 && !shown) out += "  (all ok)\n";
  }
  if (!report.across.empty()) {
    out += "\nacross nodes\n";
    for (const Finding& f : report.across) render_finding(out, f);
  }
  if (!report.nodes.empty() && !report.nodes.front().report.environment.empty()) {
    out += fmt::format("\nrecommended environment (node {}; `shardrun --fabric auto` applies it):\n",
                       report.nodes.front().host);
    for (const auto& [name, value] : report.nodes.front().report.environment)
      out += fmt::format("  export {}={}\n", name, value);
  }
  return out;
}

nlohmann::json to_json(const ClusterReport& report) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : report.nodes) {
    nlohmann::json j = to_json(n.report);
    j["ranks"] = n.ranks;
    j.erase("rank");
    nodes.push_back(j);
  }
  nlohmann::json across = nlohmann::json::array();
  for (const auto& f : report.across)
    across.push_back({{"check", f.check}, {"verdict", name_of(f.verdict)}, {"detail", f.detail}, {"advice", f.advice}});
  return {{"summary", summary_line(report)},
          {"worst", name_of(report.worst())},
          {"nodes", nodes},
          {"across_nodes", across}};
}

}  // namespace shardtrain::doctor
