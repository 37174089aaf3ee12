// Which samples each rank trains on.
//
// Every epoch has an order: a permutation of all n samples drawn from
// (seed, epoch) alone. Global batch b of the epoch is the order's slice
// [b*G, (b+1)*G), and rank r takes its contiguous part of that slice, the
// same part in every batch (sizes differ by at most one when G is not a
// multiple of the world size). So the ranks' slices of a global batch are
// disjoint, and the same seed gives the same global batches whatever the world
// size.
//
// Two orders (data.order):
//   "global"  a Fisher-Yates shuffle of all samples.
//   "shard"   for data that must be read mostly sequentially: the shards are
//             shuffled, their sample ranges laid end to end in that order, and
//             then the samples of each consecutive window of `window` samples
//             (data.shuffle_window; 0 = the largest shard) are shuffled among
//             themselves. A global batch of G <= window samples therefore
//             reads from at most two neighbouring windows: a few shards.
//
// The last partial global batch (n % G samples remain), data.last_batch:
//   drop (default)  batches_per_epoch = floor(n / G). The order's last n % G
//                   samples are not trained on this epoch; every other sample
//                   exactly once. (They differ from epoch to epoch.)
//   pad             batches_per_epoch = ceil(n / G). The last global batch is
//                   completed with the first G - n % G samples of the epoch's
//                   order (positions past n wrap around to the start), so every
//                   sample is seen at least once in the epoch, and exactly once
//                   except those padded ones, which are seen twice.
// When G divides n both are the same: every sample exactly once.
//
// Resume: batch_indices(epoch, b) is a pure function of (number of samples,
// global batch, seed, options, epoch, b) and of the rank's slice, nothing
// drawn before it. A run resumed at SamplerPosition {epoch, b} (what a
// checkpoint stores: the next global batch) with the same data, seed, global
// batch and options therefore gets exactly the global batches the original
// run would have had from there on, even with a different world size (the
// ranks split each global batch differently, but the batch is the same).
#pragma once

#include "io/loader_options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::io {

// Where a run is in its data: checkpoints store it, resume continues from it.
struct SamplerPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // next global batch within the epoch
};

struct SamplerOptions {
  SampleOrder order = SampleOrder::global;
  // "shard" needs them: samples per shard, in file order; shard s holds the
  // sample indices following those of shards 0..s-1. They must sum to n.
  std::vector<int64_t> shard_sizes;
  int64_t window = 0;     // shard order: samples shuffled together; 0 = the largest shard
  bool pad_last = false;  // pad the last partial global batch instead of dropping it
};

// The sampler's options from the [data] config; shard_sizes as above (only
// used for order "shard").
SamplerOptions sampler_options(const LoaderOptions& loader, std::vector<int64_t> shard_sizes);

class Sampler {
 public:
  Sampler(int64_t num_samples, int64_t global_batch, int rank, int world_size, uint64_t seed,
          SamplerOptions options = {});

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t num_samples() const { return num_samples_; }
  // Samples per epoch not trained on (drop) or trained on twice (pad).
  int64_t dropped_samples() const { return options_.pad_last ? 0 : num_samples_ % global_batch_; }
  int64_t padded_samples() const { return options_.pad_last ? batches_per_epoch_ * global_batch_ - num_samples_ : 0; }
  // This rank's share of every global batch.
  int64_t local_batch() const { return local_end_ - local_begin_; }
  // Offset of this rank's share within the global batch.
  int64_t local_offset() const { return local_begin_; }
  // As given, with a window of 0 resolved to the largest shard.
  const SamplerOptions& options() const { return options_; }

  // The position of the step-th global batch since the start of training
  // (step 0 = epoch 0, batch 0), and back.
  SamplerPosition position_of(int64_t step) const;
  int64_t step_of(SamplerPosition position) const { return position.epoch * batches_per_epoch_ + position.batch; }

  // This rank's sample indices of global batch `batch` of `epoch`. Not const
  // (and one thread at a time): the epoch's order is built on first use, in
  // O(n), and kept until another epoch is asked for.
  void batch_indices(int64_t epoch, int64_t batch, std::vector<int64_t>& out);

 private:
  void order_for(int64_t epoch);

  int64_t num_samples_, global_batch_, batches_per_epoch_;
  int64_t local_begin_, local_end_;
  uint64_t seed_;
  SamplerOptions options_;
  int64_t ordered_epoch_ = -1;
  std::vector<int64_t> order_;  // the epoch's order, n samples
};

}  // namespace shardtrain::io
