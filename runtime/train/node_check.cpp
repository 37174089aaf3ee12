#include "runtime/train/node_check.h"

#include "runtime/doctor/doctor.h"

#include <fmt/format.h>

#include <filesystem>

namespace shardtrain::train {

NodeCheck check_nodes(const Config& config, const comm::MpiEnv& mpi, RunDir& run) {
  doctor::ProbeOptions options;
  options.thorough = false;
  // The folder holding the splits: the data set a user staged or mounted.
  // Node-local rank 0 alone walks it: rank 0 shows each host's lowest rank,
  // and eight ranks of a node would otherwise stat the same files eight times.
  const std::filesystem::path train_split(config.data.train);
  if (mpi.local_rank() == 0)
    options.data_path =
        (train_split.has_parent_path() ? train_split.parent_path() : std::filesystem::path(".")).string();
  const auto mine = doctor::probe_node(options, doctor::process_environment(), mpi.rank());
  const auto all = doctor::gather_reports(mine, MPI_COMM_WORLD);
  NodeCheck out;
  if (mpi.rank() != 0) return out;
  const auto report = doctor::combine(all);
  out.report = doctor::to_json(report);
  out.line = doctor::summary_line(report);
  // Rank 0's: a job whose ranks disagree here fails in MPI_Init.
  out.report["mpi_transport"] = doctor::mpi_transport(all.front().facts);
  out.line += "; MPI's transport: " + out.report["mpi_transport"].get<std::string>();
  // Where each rank runs: shardrun --bind auto's placement (docs/cluster.md).
  nlohmann::json bindings = nlohmann::json::array();
  for (const auto& r : all) {
    nlohmann::json b = r.facts.value("binding", nlohmann::json::object());
    b["rank"] = r.rank;
    b["host"] = r.host;
    bindings.push_back(b);
  }
  out.report["bindings"] = bindings;
  run.write_file("doctor.json", out.report.dump(2) + "\n");
  run.log(fmt::format("[init] doctor: {} (doctor.json; `shardtrain doctor` for the full check)", out.line));
  const auto show = [&run](const doctor::Finding& f, const std::string& where) {
    if (f.verdict == doctor::Verdict::ok) return;
    run.log(fmt::format("[init] doctor: {} {}{}: {}{}", name_of(f.verdict), f.check, where, f.detail,
                        f.advice.empty() ? "" : " -> " + f.advice));
  };
  // The first node's and the differences between nodes; doctor.json has
  // every node's (a job on 128 alike nodes would say each thing 128 times).
  if (!report.nodes.empty())
    for (const auto& f : report.nodes.front().report.findings) show(f, " (" + report.nodes.front().host + ")");
  for (const auto& f : report.across) show(f, "");
  constexpr size_t kShown = 16;
  for (size_t i = 0; i < bindings.size() && i < kShown; ++i) {
    const auto& b = bindings[i];
    const std::string placed = b.value("placed", "");
    run.log(fmt::format("[init] binding: rank {} on {}: {}", b.value("rank", -1), b.value("host", "?"),
                        placed.empty() ? "not placed by shardrun, cpus " + b.value("cpus", "?") : placed));
  }
  if (bindings.size() > kShown)
    run.log(fmt::format("[init] binding: {} more ranks in doctor.json", bindings.size() - kShown));
  return out;
}

}  // namespace shardtrain::train
