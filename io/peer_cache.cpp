#include "io/peer_cache.h"

#include "io/cache.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/error.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>

namespace shardtrain::io {
namespace {

constexpr int64_t kCopyBlock = int64_t(4) << 20;

// Whether a copy left by an earlier job can be kept: it matches the
// manifest's CRC-32 (or, without a manifest, the source's size). A stale or
// torn one is copied again.
bool copy_is_good(const std::string& copy, const std::string& source, const ManifestShard* shard) {
  std::error_code ec;
  if (!std::filesystem::exists(copy, ec)) return false;
  if (shard == nullptr) return std::filesystem::file_size(copy, ec) == std::filesystem::file_size(source, ec);
  try {
    verify_shard(copy, *shard);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

PeerLayout peer_layout(MPI_Comm comm, int ranks_per_node) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  int leader = 0;  // the lowest rank of this rank's node
  if (ranks_per_node > 0) {
    leader = rank / ranks_per_node * ranks_per_node;
  } else {
    MPI_Comm shared = MPI_COMM_NULL;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
    MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, shared);
    MPI_Comm_free(&shared);
  }
  std::vector<int> leaders(static_cast<size_t>(world));
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm);
  std::vector<int> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  PeerLayout l;
  l.nodes = int(distinct.size());
  l.ranks_of_node.resize(distinct.size());
  for (int r = 0; r < world; ++r) {
    const int n = int(std::lower_bound(distinct.begin(), distinct.end(), leaders[size_t(r)]) - distinct.begin());
    l.node_of_rank.push_back(n);
    l.ranks_of_node[size_t(n)].push_back(r);
  }
  l.node = l.node_of_rank[size_t(rank)];
  return l;
}

std::string expand_node_dir(const std::string& pattern, int node) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'n') {
      out += std::to_string(node);
    } else if (c == 'h') {
      char host[HOST_NAME_MAX + 1] = {};
      ::gethostname(host, sizeof host - 1);
      out += host;
    } else {
      out += c;  // "%%" and anything else: the character itself
    }
  }
  return out;
}

PeerCache::PeerCache(MPI_Comm comm, const std::string& dir_pattern, int ranks_per_node,
                     const std::vector<std::string>& sources, const Manifest* manifest)
    : comm_(comm), layout_(peer_layout(comm, ranks_per_node)) {
  MPI_Comm_rank(comm, &rank_);
  dir_ = expand_node_dir(dir_pattern, layout_.node);
  local_paths_.resize(sources.size());
  for (size_t s = 0; s < sources.size(); ++s)
    if (held_here(int(s)))
      local_paths_[s] = (std::filesystem::path(dir_) / std::filesystem::path(sources[s]).filename()).string();
  std::string problem;
  try {
    if (layout_.ranks_of_node[size_t(layout_.node)].front() == rank_) stage(sources, manifest);
  } catch (const std::exception& e) {
    problem = e.what();
  }
  comm::agree_or_throw(comm, problem);  // every node's copies are there, or every rank throws
}

void PeerCache::stage(const std::vector<std::string>& sources, const Manifest* manifest) {
  for (size_t s = 0; s < sources.size(); ++s) {
    if (!held_here(int(s))) continue;
    const std::string& dst = local_paths_[s];
    if (copy_is_good(dst, sources[s], manifest ? &manifest->shards[s] : nullptr)) continue;
    const CopyStats c = with_context(fmt::format("io.peer_cache: copying {} to {}", sources[s], dst),
                                     [&] { return copy_file_limited(sources[s], dst, kCopyBlock, nullptr); });
    staged_bytes_ += c.bytes;
    if (manifest) verify_shard(dst, manifest->shards[s]);
  }
}

int PeerCache::server(int shard, int requester) const {
  const std::vector<int>& ranks = layout_.ranks_of_node[size_t(owner(shard))];
  return ranks[size_t(requester) % ranks.size()];
}

PeerPlan PeerCache::plan(const std::vector<std::vector<int64_t>>& batch_of_rank,
                         const std::function<int(int64_t)>& shard_of) const {
  const size_t world = batch_of_rank.size();
  PeerPlan p;
  p.send.resize(world);
  p.recv.resize(world);
  for (size_t r = 0; r < world; ++r) {
    if (layout_.node_of_rank[r] == layout_.node) continue;  // a rank of this node reads the copies itself
    for (const int64_t i : batch_of_rank[r]) {
      const int s = shard_of(i);
      if (held_here(s) && server(s, int(r)) == rank_) p.send[r].push_back(i);
    }
  }
  for (const int64_t i : batch_of_rank[size_t(rank_)]) {
    const int s = shard_of(i);
    if (!held_here(s)) p.recv[size_t(server(s, rank_))].push_back(i);
  }
  for (auto* lists : {&p.send, &p.recv})
    for (std::vector<int64_t>& l : *lists) std::sort(l.begin(), l.end());
  return p;
}

void PeerCache::start_move(const PeerPlan& plan, const std::vector<uint8_t>& send, std::vector<uint8_t>& recv,
                           size_t sample_bytes, PeerTransfer& t) const {
  // Counts in samples (a contiguous type of one sample), so that a large
  // batch's bytes do not overflow MPI's int counts.
  const size_t world = plan.send.size();
  t.send_n.assign(world, 0);
  t.send_at.assign(world, 0);
  t.recv_n.assign(world, 0);
  t.recv_at.assign(world, 0);
  int sent = 0, received = 0;
  for (size_t r = 0; r < world; ++r) {
    t.send_n[r] = int(plan.send[r].size());
    t.send_at[r] = sent;
    sent += t.send_n[r];
    t.recv_n[r] = int(plan.recv[r].size());
    t.recv_at[r] = received;
    received += t.recv_n[r];
  }
  ST_CHECK(size_t(sent) * sample_bytes == send.size(), "io.peer_cache: {} samples to send, {} bytes read", sent,
           send.size());
  recv.resize(size_t(received) * sample_bytes);
  MPI_Datatype sample = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(int(sample_bytes), MPI_BYTE, &sample);
  MPI_Type_commit(&sample);
  MPI_Ialltoallv(send.data(), t.send_n.data(), t.send_at.data(), sample, recv.data(), t.recv_n.data(), t.recv_at.data(),
                 sample, comm_, &t.request);
  MPI_Type_free(&sample);  // freed once the move no longer needs it
}

void PeerCache::finish_move(PeerTransfer& t) {
  if (t.active()) comm::wait_backing_off(t.request);  // on the I/O thread: a blocking wait would spin
}

std::string PeerCache::describe() const {
  return fmt::format("peer cache: node {} of {} holds the shards s with s % {} = {} in {}", layout_.node, layout_.nodes,
                     layout_.nodes, layout_.node, dir_);
}

}  // namespace shardtrain::io
