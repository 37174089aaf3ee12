// Which samples each rank trains on. Every epoch is a global shuffle of all
// samples drawn from (seed, epoch) alone; global batch b of the epoch is the
// permutation's slice [b*G, (b+1)*G), and rank r takes its contiguous part of
// that slice (sizes differ by at most one when G is not a multiple of the
// world size). So every sample is seen at most once per epoch across all ranks,
// the ranks' slices are disjoint, and the same seed gives the same batches
// whatever the world size. The last partial global batch is dropped.
#pragma once

#include <cstdint>
#include <vector>

namespace shardtrain::io {

// Where a run is in its data: checkpoints store it, resume continues from it.
struct SamplerPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // next global batch within the epoch
};

class Sampler {
 public:
  Sampler(int64_t num_samples, int64_t global_batch, int rank, int world_size, uint64_t seed);

  int64_t batches_per_epoch() const { return num_samples_ / global_batch_; }
  int64_t global_batch() const { return global_batch_; }
  // This rank's share of every global batch.
  int64_t local_batch() const { return local_end_ - local_begin_; }
  // Offset of this rank's share within the global batch.
  int64_t local_offset() const { return local_begin_; }

  // This rank's sample indices of global batch `batch` of `epoch`.
  void batch_indices(int64_t epoch, int64_t batch, std::vector<int64_t>& out);

 private:
  void shuffle_for(int64_t epoch);

  int64_t num_samples_, global_batch_;
  int64_t local_begin_, local_end_;
  uint64_t seed_;
  int64_t shuffled_epoch_ = -1;
  std::vector<int64_t> permutation_;
};

}  // namespace shardtrain::io
