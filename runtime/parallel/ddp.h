// DDP: data parallelism with bucketed gradient all-reduce overlapped with
// backward (the semantics of PyTorch's c10d Reducer, at Block granularity).
//
// Buckets are contiguous ranges of the model's flat gradient buffer made of
// whole Blocks in reverse Block order (the order backward produces them): the
// first bucket holds up to first_bucket_mb, the others up to bucket_mb; a
// Block larger than the cap is a bucket of its own. Backward writes gradients
// straight into the buffer, so a bucket is a view, never a copy. As soon as
// the last Block of a bucket finishes its backward, the bucket's all-reduce is
// issued (buckets complete, and so launch, strictly in bucket order); the
// step waits for all of them only before the optimizer.
//
// Bucket batches (bucket_batch = k > 1): a complete bucket waits for the next
// k - 1 and the k are issued together, as one group of the communicator
// (Communicator::begin_group: one fused NCCL launch instead of k, at the cost
// of starting the batch's first reduction when its last bucket is ready).
// The last bucket, the one holding Block 0, always closes its batch. The
// values reduced are the same as with k = 1; only the launches change.
//
// Averaging costs nothing: the loss gradient is already scaled by
// 1/global_batch on every rank, so the sum over ranks is the gradient of the
// global mean loss, exact also when ranks hold slices differing by a sample.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/nn/model.h"
#include "runtime/telemetry/step_record.h"

#include <string>
#include <vector>

namespace shardtrain::parallel {

struct DdpOptions {
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  std::string grad_dtype = "f32";  // "f32" | "bf16": the dtype gradients travel in
  int64_t bucket_batch = 1;        // consecutive buckets issued as one group (1: each at once)
};

struct Bucket {
  int first_block = 0, last_block = 0;  // blocks [first, last] in forward numbering
  int64_t offset = 0, numel = 0;        // range of the flat gradient buffer
};

// Communication of the steps since the last take_stats() (see comm/work.h).
struct CommStats {
  double comm_s = 0;       // data movement: from all ranks' arrival to completion, summed
  double peer_wait_s = 0;  // collectives waiting for the other ranks to issue them, summed
  double exposed_s = 0;    // training thread blocked while data moved: exposed communication
  double blocked_peers_s = 0;  // training thread blocked waiting for other ranks (imbalance)
  int64_t bytes = 0;       // payload bytes all-reduced
  // Bytes this rank sends with a bandwidth-optimal algorithm (ring: an
  // all-reduce 2(N-1)/N of its buffer, an all-gather or reduce-scatter
  // (N-1)/N of the full buffer): the figure the theory counts, whatever the
  // algorithm that ran (a shared-memory one sends nothing over a network).
  int64_t wire_bytes = 0;
  int64_t collectives = 0;
  std::vector<telemetry::CollectiveRecord> records;  // one per completed collective
};

class Ddp final : public nn::BlockHooks {
 public:
  Ddp(nn::Model& model, comm::Communicator& comm, const DdpOptions& options);

  // The buckets a Ddp over these parameters would use (a pure function).
  static std::vector<Bucket> plan_buckets(const nn::FlatParameters& flat, const DdpOptions& options);

  // Checks that every rank built the same model (an error naming the ranks
  // that differ, raised on every rank), then copies rank 0's parameters to all.
  void broadcast_parameters();

  // sync = false: the coming backward only accumulates gradients locally
  // (no_sync, for gradient accumulation); the next synced backward reduces
  // the sum.
  void set_sync(bool sync) { sync_ = sync; }

  void before_backward(int block) override;
  void after_backward(int block) override;

  // Blocks until bucket b's all-reduce (if launched this step) completed;
  // its gradients are then the global ones. Buckets complete in order, so
  // the optimizer can update bucket 0's parameters while later buckets are
  // still being reduced.
  void wait_bucket(size_t b);
  // All buckets: call before anything that needs every gradient (clipping).
  void wait_gradients();

  CommStats take_stats();
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void launch(size_t bucket);
  void launch_ready();  // the buckets in ready_, as one group

  nn::Model& model_;
  comm::Communicator& comm_;
  DdpOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_block_;
  std::vector<int> pending_;               // blocks of each bucket not yet through backward
  std::vector<comm::WorkPtr> works_;       // per bucket: this step's all-reduce, if launched
  std::vector<size_t> ready_;              // complete buckets of the batch not yet launched
  std::vector<Tensor> wire_;               // bf16 copies of the buckets (grad_dtype = bf16)
  bool sync_ = true;
  CommStats stats_;
  int comm_lane_ = -1;  // the trace's "comm engine" lane
};

}  // namespace shardtrain::parallel
