// Hierarchical all-reduce, for several ranks per node on several nodes: the
// links between nodes are the slow ones, and this moves across them only
// 1/L of the buffer per rank (L ranks per node), all L ranks of a node in
// parallel, each over its own peers.
//
//   1. reduce-scatter within the node: local rank l holds the node's sum of
//      segment l (a ReduceScatterRing over the node);
//   2. all-reduce segment l across nodes, among the ranks with local index l
//      (an AllreduceRing, or the MPI library's for a small segment);
//   3. all-gather within the node (an AllgatherRing).
//
// Deterministic for the same layout of ranks: each segment is summed in a
// fixed order (within nodes in ring order, then across nodes), once; every
// rank receives the result's bits.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/engine/scratch.h"

namespace shardtrain::comm {

class AllreduceHierarchical {
 public:
  // `node` and `cross` are transports over the node's ranks and over the ranks
  // with this node-local index (the same number of ranks on every node).
  // `poll_native`: a small segment's MPI-library all-reduce across nodes is
  // the non-blocking call polled with cross's policy (MpiNative).
  AllreduceHierarchical(MpiTransport& node, MpiTransport& cross, int64_t seq, DType dtype, void* buf, int64_t numel,
                        float scale, const CommOptions& options, Scratch& scratch, bool poll_native = false);

  void run();

 private:
  MpiTransport& node_;
  MpiTransport& cross_;
  int64_t seq_;
  DType dtype_;
  void* buf_;
  int64_t numel_;
  float scale_;
  const CommOptions& options_;
  Scratch& scratch_;
  bool poll_native_;
};

}  // namespace shardtrain::comm
