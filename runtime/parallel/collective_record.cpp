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
  rec.busbw_gbs = rec.duration_s > 0
                      ? double(rec.bytes) * telemetry::busbw_factor(rec.op, ranks) / rec.duration_s * 1e-9
                      : 0.0;
  return rec;
}

}  // namespace shardtrain::parallel
