#include "runtime/parallel/comm_stats.h"

#include "runtime/parallel/collective_record.h"

namespace shardtrain::parallel {

void CommStats::add_completed(const comm::Work& w, int ranks) {
  const telemetry::CollectiveRecord rec = collective_record(w, ranks);
  records.push_back(rec);
  comm_s += rec.duration_s;
  peer_wait_s += rec.peer_wait_s;
  exposed_s += w.blocked_on_transfer();
  blocked_peers_s += w.blocked_waiting_for_peers();
  bytes += w.bytes();
  ++collectives;
}

void CommStats::add(const CommStats& o) {
  comm_s += o.comm_s;
  peer_wait_s += o.peer_wait_s;
  exposed_s += o.exposed_s;
  blocked_peers_s += o.blocked_peers_s;
  bytes += o.bytes;
  wire_bytes += o.wire_bytes;
  collectives += o.collectives;
  records.insert(records.end(), o.records.begin(), o.records.end());
}

}  // namespace shardtrain::parallel
