// A cache tier shared by the nodes of a job (io.peer_cache.dir): with N
// nodes, node n holds the shards s with s % N == n on its own disk, copied
// once from the shared store by its first rank (a verified copy found there
// is kept). A rank reads a shard its node holds from that copy, and a shard
// another node holds from a rank of that node, over MPI: the shared store is
// read once per job, not once per node, and each node's disk holds 1/N of
// the data set.
//
// The exchange is planned, not requested: every rank knows every rank's
// share of each batch (the sampler is deterministic), so for a batch each
// rank computes what it serves to whom and what it receives from whom, reads
// what it serves, and one non-blocking MPI_Ialltoallv moves the bytes
// (plan(), start_move(), finish_move()). Every rank takes part in every
// batch's exchange, in the same order.
#pragma once

#include "io/manifest.h"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::io {

struct PeerLayout {
  int nodes = 1, node = 0;  // how many, and this rank's
  std::vector<int> node_of_rank;
  std::vector<std::vector<int>> ranks_of_node;
};

// Collective. Nodes are the ranks that share memory (MPI's view, numbered by
// their lowest rank), or every `ranks_per_node` consecutive ranks when > 0.
PeerLayout peer_layout(MPI_Comm comm, int ranks_per_node);

// The node that holds shard `shard` of a split among `nodes` nodes.
inline int peer_owner(int shard, int nodes) { return shard % nodes; }

// "%h": this host's name; "%n": the node's index; "%%": "%".
std::string expand_node_dir(const std::string& pattern, int node);

// One batch's exchange: per rank, the sample indices (ascending) this rank
// sends it, and those it receives from it.
struct PeerPlan {
  std::vector<std::vector<int64_t>> send, recv;
};

// A batch's exchange in flight (start_move to finish_move): MPI needs its
// counts until it completes.
struct PeerTransfer {
  std::vector<int> send_n, send_at, recv_n, recv_at;
  MPI_Request request = MPI_REQUEST_NULL;
  bool active() const { return request != MPI_REQUEST_NULL; }
};

class PeerCache {
 public:
  // Collective over `comm`. `sources`: the shards in the shared store;
  // `manifest` (may be null): copies are checked against its CRC-32s.
  PeerCache(MPI_Comm comm, const std::string& dir_pattern, int ranks_per_node, const std::vector<std::string>& sources,
            const Manifest* manifest);

  const PeerLayout& layout() const { return layout_; }
  int owner(int shard) const { return peer_owner(shard, layout_.nodes); }
  bool held_here(int shard) const { return owner(shard) == layout_.node; }
  // This node's copy of a shard it holds.
  const std::string& local_path(int shard) const { return local_paths_[size_t(shard)]; }
  // The rank of the shard's node that serves `requester`'s reads of it:
  // spread over that node's ranks by the requester's rank.
  int server(int shard, int requester) const;

  // What this rank sends and receives in a batch whose shares are
  // `batch_of_rank` (every rank's sample indices), `shard_of` mapping a
  // sample to its shard.
  PeerPlan plan(const std::vector<std::vector<int64_t>>& batch_of_rank,
                const std::function<int(int64_t)>& shard_of) const;
  // Collective, non-blocking: `send` holds plan.send's samples in order
  // (rank by rank), `recv` receives plan.recv's the same way once
  // finish_move(t) returns; neither may change meanwhile. Every rank starts
  // its batches' moves in the same order.
  void start_move(const PeerPlan& plan, const std::vector<uint8_t>& send, std::vector<uint8_t>& recv,
                  size_t sample_bytes, PeerTransfer& t) const;
  static void finish_move(PeerTransfer& t);

  int64_t staged_bytes() const { return staged_bytes_; }  // this rank's copies from the shared store
  std::string describe() const;                           // the [init] line's words

 private:
  void stage(const std::vector<std::string>& sources, const Manifest* manifest);

  MPI_Comm comm_ = MPI_COMM_NULL;  // not owned
  int rank_ = 0;
  PeerLayout layout_;
  std::string dir_;
  std::vector<std::string> local_paths_;  // per shard: this node's copy path ("" if not held here)
  int64_t staged_bytes_ = 0;
};

}  // namespace shardtrain::io
