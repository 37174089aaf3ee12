// `shardtrain doctor`: what each node of a job offers it, judged. Every rank
// probes its node (probe_node), the reports meet on rank 0 over MPI
// (gather_reports), and rank 0 groups them by host and names any node whose
// fabric differs from the others (combine). docs/cluster.md shows the output.
#pragma once

#include "runtime/doctor/node_report.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace shardtrain::doctor {

struct ProbeOptions {
  std::string sysroot = "/";  // where /sys and /proc are read; another root: a fixture tree, not this machine
  std::string data_path;      // the job's data, checked when given
  bool thorough = true;       // also what takes seconds (ucx_info); a job's start-up check leaves it out
};

NodeReport probe_node(const ProbeOptions& options, const Environment& env, int rank);

struct NodeGroup {
  std::string host;
  std::vector<int> ranks;
  NodeReport report;  // the lowest rank's
};

struct ClusterReport {
  std::vector<NodeGroup> nodes;  // in order of their lowest rank
  std::vector<Finding> across;   // nodes that differ from the others
  Verdict worst() const;
  int count(Verdict v) const;
};

ClusterReport combine(const std::vector<NodeReport>& reports);

// Every rank's report to rank 0 of `comm` (collective); rank 0 gets them in
// rank order, the others an empty vector.
std::vector<NodeReport> gather_reports(const NodeReport& mine, MPI_Comm comm);

// The first node in full and, for the others, what differs (warnings and
// failures); then the recommended environment.
std::string render_text(const ClusterReport& report);
nlohmann::json to_json(const ClusterReport& report);
// What carries MPI's traffic, from a rank's facts: "UCX (pml = ucx) on
// rxe0:1", "ob1 over TCP or shared memory (pml = ^ucx, ...)".
std::string mpi_transport(const nlohmann::json& facts);

// "2 nodes, 4 ranks: 0 fail, 1 warn (mpi-transport)": for a job's log.
std::string summary_line(const ClusterReport& report);

}  // namespace shardtrain::doctor
