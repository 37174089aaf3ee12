#include "runtime/parallel/collective_record.h"

namespace shardtrain::parallel {

telemetry::CollectiveRecord collective_record(const comm::Work& w, int ranks) {
  telemetry::CollectiveRecord rec;
  rec.op = w.op();
  rec.algorithm = w.algorithm();
  rec.seq = w.seq();
  rec.bytes = w.bytes();
  rec.duration_s = w.finished_at() - w.arrived_at();
  rec.peer_wait_s = w.arrived_at() - w.started_at();
  // nccl-tests' size: the whole buffer, which for an all-gather is its output
  // (this rank's shard times the ranks); Work::bytes() is this rank's part.
  const double size = rec.op == "allgather" ? double(rec.bytes) * ranks : double(rec.bytes);
  rec.busbw_gbs = rec.duration_s > 0 ? size * telemetry::busbw_factor(rec.op, ranks) / rec.duration_s * 1e-9 : 0.0;
  return rec;
}

}  // namespace shardtrain::parallel
