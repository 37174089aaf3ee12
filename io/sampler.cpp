#include "io/sampler.h"

#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <numeric>

namespace shardtrain::io {
namespace {
constexpr uint64_t kShuffleStream = 0x73687566;  // "shuf"
}

Sampler::Sampler(int64_t num_samples, int64_t global_batch, int rank, int world_size, uint64_t seed)
    : num_samples_(num_samples), global_batch_(global_batch), seed_(seed) {
  ST_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "bad rank {} of world {}", rank,
           world_size);
  ST_CHECK(global_batch >= world_size,
           "train.global_batch_size {} is smaller than the world size {}: every rank needs samples",
           global_batch, world_size);
  ST_CHECK(num_samples >= global_batch,
           "the training split has {} samples, fewer than one global batch of {} "
           "(lower train.global_batch_size or raise data.train_limit)",
           num_samples, global_batch);
  local_begin_ = global_batch * rank / world_size;
  local_end_ = global_batch * (rank + 1) / world_size;
}

void Sampler::shuffle_for(int64_t epoch) {
  if (epoch == shuffled_epoch_) return;
  permutation_.resize(size_t(num_samples_));
  std::iota(permutation_.begin(), permutation_.end(), int64_t{0});
  Rng rng(stream_key(seed_, kShuffleStream, uint64_t(epoch)));
  for (int64_t i = num_samples_ - 1; i > 0; --i)  // Fisher-Yates
    std::swap(permutation_[size_t(i)], permutation_[rng.below(uint64_t(i) + 1)]);
  shuffled_epoch_ = epoch;
}

void Sampler::batch_indices(int64_t epoch, int64_t batch, std::vector<int64_t>& out) {
  ST_CHECK(batch >= 0 && batch < batches_per_epoch(), "batch {} out of range (an epoch has {})",
           batch, batches_per_epoch());
  shuffle_for(epoch);
  const int64_t start = batch * global_batch_;
  out.assign(permutation_.begin() + start + local_begin_, permutation_.begin() + start + local_end_);
}

}  // namespace shardtrain::io
