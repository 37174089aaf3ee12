#include "io/sampler.h"

#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <algorithm>
#include <numeric>

namespace shardtrain::io {
namespace {
constexpr uint64_t kShuffleStream = 0x73687566;  // "shuf": the global order
constexpr uint64_t kShardStream = 0x73686172;    // "shar": the shard order
constexpr uint64_t kWindowStream = 0x77696e64;   // "wind": one window's shuffle

// Fisher-Yates over [first, last), drawing from `rng`.
void shuffle(int64_t* first, int64_t* last, Rng& rng) {
  for (int64_t i = last - first - 1; i > 0; --i) std::swap(first[i], first[rng.below(uint64_t(i) + 1)]);
}
}  // namespace

SamplerOptions sampler_options(const LoaderOptions& loader, std::vector<int64_t> shard_sizes) {
  SamplerOptions o;
  o.order = loader.order;
  o.shard_sizes = std::move(shard_sizes);
  o.window = loader.shuffle_window;
  o.pad_last = loader.last_batch == LastBatch::pad;
  return o;
}

Sampler::Sampler(int64_t num_samples, int64_t global_batch, int rank, int world_size, uint64_t seed,
                 SamplerOptions options)
    : num_samples_(num_samples), global_batch_(global_batch), seed_(seed), options_(std::move(options)) {
  ST_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "bad rank {} of world {}", rank, world_size);
  ST_CHECK(global_batch >= world_size,
           "train.global_batch_size {} is smaller than the world size {}: every rank needs samples", global_batch,
           world_size);
  // Also what makes padding simple: the padded tail (< G samples) never wraps
  // around the order more than once.
  ST_CHECK(num_samples >= global_batch,
           "the training split has {} samples, fewer than one global batch of {} "
           "(lower train.global_batch_size or raise data.train_limit)",
           num_samples, global_batch);
  if (options_.order == SampleOrder::shard) {
    const std::vector<int64_t>& sizes = options_.shard_sizes;
    ST_CHECK(!sizes.empty(), "data.order = \"shard\" needs the shards' sample counts");
    ST_CHECK(std::all_of(sizes.begin(), sizes.end(), [](int64_t s) { return s >= 0; }),
             "a shard has a negative sample count");
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    ST_CHECK(total == num_samples, "data.order = \"shard\": the {} shards hold {} samples, the training split {}",
             sizes.size(), total, num_samples);
    ST_CHECK(options_.window >= 0, "data.shuffle_window must not be negative ({})", options_.window);
    if (options_.window == 0) options_.window = *std::max_element(sizes.begin(), sizes.end());
  }
  batches_per_epoch_ = options_.pad_last ? (num_samples + global_batch - 1) / global_batch : num_samples / global_batch;
  local_begin_ = global_batch * rank / world_size;
  local_end_ = global_batch * (rank + 1) / world_size;
}

SamplerPosition Sampler::position_of(int64_t step) const {
  ST_CHECK(step >= 0, "step {} is negative", step);
  return {step / batches_per_epoch_, step % batches_per_epoch_};
}

void Sampler::order_for(int64_t epoch) {
  if (epoch == ordered_epoch_) return;
  order_.resize(size_t(num_samples_));
  if (options_.order == SampleOrder::global) {
    std::iota(order_.begin(), order_.end(), int64_t{0});
    Rng rng(stream_key(seed_, kShuffleStream, uint64_t(epoch)));
    shuffle(order_.data(), order_.data() + num_samples_, rng);
  } else {
    // Shard order first, then each shard's samples in file order...
    const std::vector<int64_t>& sizes = options_.shard_sizes;
    std::vector<int64_t> starts(sizes.size()), shards(sizes.size());
    std::exclusive_scan(sizes.begin(), sizes.end(), starts.begin(), int64_t{0});
    std::iota(shards.begin(), shards.end(), int64_t{0});
    const uint64_t epoch_key = stream_key(seed_, kShardStream, uint64_t(epoch));
    Rng rng(epoch_key);
    shuffle(shards.data(), shards.data() + shards.size(), rng);
    int64_t* out = order_.data();
    for (int64_t s : shards)
      for (int64_t i = 0; i < sizes[size_t(s)]; ++i) *out++ = starts[size_t(s)] + i;
    // ...then each window shuffled on its own stream: window w's order does
    // not depend on the others, so a reader could compute just the ones it needs.
    const int64_t w = options_.window;
    for (int64_t begin = 0, k = 0; begin < num_samples_; begin += w, ++k) {
      Rng window_rng(stream_key(epoch_key, kWindowStream, uint64_t(k)));
      shuffle(order_.data() + begin, order_.data() + std::min(begin + w, num_samples_), window_rng);
    }
  }
  ordered_epoch_ = epoch;
}

void Sampler::batch_indices(int64_t epoch, int64_t batch, std::vector<int64_t>& out) {
  ST_CHECK(epoch >= 0, "epoch {} is negative", epoch);
  ST_CHECK(batch >= 0 && batch < batches_per_epoch_, "batch {} out of range (an epoch has {})", batch,
           batches_per_epoch_);
  order_for(epoch);
  out.resize(size_t(local_end_ - local_begin_));
  for (int64_t i = local_begin_; i < local_end_; ++i) {
    int64_t p = batch * global_batch_ + i;
    if (p >= num_samples_) p -= num_samples_;  // pad: wrap to the start of the order
    out[size_t(i - local_begin_)] = order_[size_t(p)];
  }
}

}  // namespace shardtrain::io
