// What the doctor says of one node: findings (each a verdict with what to do),
// the environment it recommends for the fabric it found, and a fingerprint of
// the facts every node of a job should share, for comparing nodes on rank 0.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain::doctor {

enum class Verdict { ok, warn, fail };
const char* name_of(Verdict v);

struct Finding {
  std::string check;  // "rdma", "roce-gid", "gpudirect", "mpi-pml", ...
  Verdict verdict = Verdict::ok;
  std::string detail;  // what was found
  std::string advice;  // what to do; empty when nothing
};

// Environment variables, by name (the process's, or a test's).
using Environment = std::map<std::string, std::string>;
Environment process_environment();

struct NodeReport {
  std::string host;
  int rank = 0;
  std::vector<Finding> findings;
  // Recommended settings in the order they should be printed.
  std::vector<std::pair<std::string, std::string>> environment;
  // Facts that should be equal on every node ("rdma.active_ports": "mlx5_0:1").
  std::map<std::string, std::string> fingerprint;
  nlohmann::json facts = nlohmann::json::object();

  void add(std::string check, Verdict verdict, std::string detail, std::string advice = {});
  void recommend(const std::string& name, const std::string& value);
  Verdict worst() const;
};

nlohmann::json to_json(const NodeReport& r);
NodeReport node_report_from_json(const nlohmann::json& j);

}  // namespace shardtrain::doctor
