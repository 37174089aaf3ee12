// Collective algorithms chosen by measurement. `shardtrain bench comm
// --tune-algorithms` times every algorithm the MPI backend can run for each collective
// (the MPI library's own, the pipelined ring, the one-shot exchange, shared
// memory, hierarchical) at each size on the world communicator, and writes
// the fastest per size into a tuning file for that topology; with
// comm.tuning the world communicator then picks from the file instead of its
// size thresholds (CommOptions), choosing for a size the algorithm measured
// at the nearest size (by ratio). A file is for the topology it was measured
// on: its fingerprint (ranks, nodes, ranks per node, shared memory, the
// hosts and the MPI library) must be this job's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardtrain::comm {

struct TopologyFingerprint {
  int ranks = 0, nodes = 0, ranks_per_node = 0;  // ranks_per_node: the largest node's
  bool shared_memory = true;                     // comm.shared_memory
  uint32_t hosts_and_library = 0;                // FNV-1a of the node leaders' host names and the MPI library
  // "4r-2n-2g-shm-1a2b3c4d": the name of its file in the cache.
  std::string key() const;
};

// Where `bench comm --tune-algorithms` keeps the file of a topology, and where
// comm.tuning = "auto" looks: $XDG_CACHE_HOME/shardtrain (else
// ~/.cache/shardtrain)/comm-tuning-KEY.json.
std::string cached_tuning_path(const TopologyFingerprint& fp);

class Tuning {
 public:
  struct Choice {
    int64_t bytes = 0;
    std::string algorithm;  // "mpi", "ring", "oneshot", "shm", "hierarchical"
    double seconds = 0;     // its median round, per operation
  };

  explicit Tuning(const TopologyFingerprint& fp) : fp_(fp) {}
  // The file at `path` (or its text, read from `path`); an Error naming
  // the file when it cannot be read or parsed. The fingerprint is not
  // checked here (matches()).
  static Tuning load(const std::string& path);
  static Tuning parse(const std::string& text, const std::string& path);
  void save(const std::string& path) const;  // creates the directory

  const TopologyFingerprint& fingerprint() const { return fp_; }
  bool matches(const TopologyFingerprint& here) const { return fp_.key() == here.key(); }
  void add(const std::string& op, Choice choice);
  // Above `bytes` (0: no limit) the nearest size no longer decides: `op`
  // takes its algorithm `beyond` where one is set, else the thresholds
  // decide. The probes at job start stop at a time budget
  // (engine/algorithm_probe.h) and set both; a file `bench comm
  // --tune-algorithms` wrote has no limit.
  void apply_up_to(int64_t bytes) { up_to_ = bytes; }
  int64_t applies_up_to() const { return up_to_; }
  void set_beyond(const std::string& op, std::string algorithm) { beyond_[op] = std::move(algorithm); }
  // The algorithm measured fastest for `op` at the size nearest `bytes`;
  // above the limit, the one set beyond it; empty where there is none.
  // (Asked at every collective: no copy.)
  const std::string& choose(std::string_view op, int64_t bytes) const;
  // The sizes measured per op, in order.
  const std::map<std::string, std::vector<Choice>, std::less<>>& choices() const { return ops_; }

 private:
  TopologyFingerprint fp_;
  int64_t up_to_ = 0;
  std::map<std::string, std::string, std::less<>> beyond_;
  std::map<std::string, std::vector<Choice>, std::less<>> ops_;
};

}  // namespace shardtrain::comm
