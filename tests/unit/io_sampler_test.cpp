// The sampler's promises (io/sampler.h): every sample exactly once per epoch
// across all ranks (drop: the n % G left over are not seen, pad: the first
// G - n % G of the order are seen twice), disjoint rank slices, orders fixed by
// (seed, epoch) whatever the world size, resume from (epoch, batch), and the
// shard order's locality. Ranks are simulated in one process: one Sampler per
// rank; tests/mpi/io_sampler_ranks_test.cpp checks the same across real ranks.
#include "io/sampler.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>

using namespace shardtrain;
using namespace shardtrain::io;

namespace {

// Uneven shard sizes (some tiny, one empty) summing to n.
std::vector<int64_t> uneven_shards(int64_t n) {
  std::vector<int64_t> sizes;
  for (int64_t i = 0, left = n; left > 0; ++i) {
    const int64_t s = i == 2 ? 0 : std::min(left, 3 + (i * 37) % 50);
    sizes.push_back(s);
    left -= s;
  }
  return sizes;
}

SamplerOptions make_options(const std::string& order, int64_t n, bool pad, int64_t window = 0) {
  SamplerOptions o;
  o.order = parse_enum<SampleOrder>(order).value();
  if (o.order == SampleOrder::shard) o.shard_sizes = uneven_shards(n);
  o.window = window;
  o.pad_last = pad;
  return o;
}

// Every global batch of `epoch`: the ranks' slices joined in rank order, with
// a check that each rank got local_batch() samples.
std::vector<std::vector<int64_t>> epoch_batches(int64_t n, int64_t g, int world, uint64_t seed, const SamplerOptions& o,
                                                int64_t epoch) {
  std::vector<Sampler> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(n, g, r, world, seed, o);
  std::vector<std::vector<int64_t>> batches(size_t(ranks[0].batches_per_epoch()));
  std::vector<int64_t> idx;
  for (int64_t b = 0; b < ranks[0].batches_per_epoch(); ++b)
    for (auto& s : ranks) {
      s.batch_indices(epoch, b, idx);
      EXPECT_EQ(int64_t(idx.size()), s.local_batch());
      batches[size_t(b)].insert(batches[size_t(b)].end(), idx.begin(), idx.end());
    }
  return batches;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

struct Case {
  int64_t n, g;
};
// Sample counts not divisible by the global batch (and one that is), global
// batches not divisible by 2, 3 or 4 ranks.
const Case kCases[] = {{1003, 64}, {100, 7}, {257, 10}, {15, 10}, {120, 12}, {13, 13}};

}  // namespace

TEST(Sampler, ExactlyOncePerEpochAcrossRanks) {
  for (const char* order : {"global", "shard"})
    for (bool pad : {false, true})
      for (int64_t window : {int64_t{0}, int64_t{16}})
        for (const Case& c : kCases)
          for (int world : {1, 2, 3, 4}) {
            SCOPED_TRACE(::testing::Message() << "order " << order << " pad " << pad << " window " << window << " n "
                                              << c.n << " G " << c.g << " world " << world);
            const SamplerOptions o = make_options(order, c.n, pad, window);
            const Sampler s(c.n, c.g, 0, world, 5, o);
            const auto batches = epoch_batches(c.n, c.g, world, 5, o, 1);
            const int64_t remainder = c.n % c.g;
            ASSERT_EQ(int64_t(batches.size()), pad ? (c.n + c.g - 1) / c.g : c.n / c.g);
            std::map<int64_t, int> seen;
            for (const auto& batch : batches) {
              EXPECT_EQ(int64_t(batch.size()), c.g);
              // The ranks' slices of a batch are disjoint (padding wraps into
              // batch 0's positions, never into the last batch itself).
              EXPECT_EQ(std::set<int64_t>(batch.begin(), batch.end()).size(), batch.size());
              for (int64_t i : batch) {
                ASSERT_GE(i, 0);
                ASSERT_LT(i, c.n);
                ++seen[i];
              }
            }
            const std::vector<int64_t> all = flatten(batches);
            if (!pad) {
              // Every sample at most once; all but n % G of them.
              EXPECT_EQ(int64_t(seen.size()), c.n - remainder);
              for (const auto& [i, count] : seen) EXPECT_EQ(count, 1) << "sample " << i;
              EXPECT_EQ(s.dropped_samples(), remainder);
              EXPECT_EQ(s.padded_samples(), 0);
            } else {
              // Every sample at least once; twice exactly the first G - n % G
              // of the epoch's order, which complete the last batch.
              const int64_t padded = remainder == 0 ? 0 : c.g - remainder;
              EXPECT_EQ(int64_t(seen.size()), c.n);
              EXPECT_EQ(s.padded_samples(), padded);
              EXPECT_EQ(s.dropped_samples(), 0);
              std::set<int64_t> twice;
              for (const auto& [i, count] : seen) {
                EXPECT_LE(count, 2);
                if (count == 2) twice.insert(i);
              }
              EXPECT_EQ(twice, std::set<int64_t>(all.begin(), all.begin() + padded));
              EXPECT_TRUE(std::equal(all.begin() + c.n, all.end(), all.begin()));
            }
          }
}

TEST(Sampler, SameSeedSameGlobalBatchWhateverTheWorldSize) {
  for (const char* order : {"global", "shard"}) {
    SCOPED_TRACE(order);
    const SamplerOptions o = make_options(order, 500, false);
    Sampler one(500, 40, 0, 1, 3, o);
    std::vector<int64_t> whole, part;
    for (int64_t b : {0, 5, 11}) {
      one.batch_indices(2, b, whole);
      std::vector<int64_t> joined;
      for (int r = 0; r < 3; ++r) {
        Sampler s(500, 40, r, 3, 3, o);
        s.batch_indices(2, b, part);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, whole);
    }
  }
}

TEST(Sampler, SameSeedSameOrderNewEpochOrSeedNewOrder) {
  for (const char* order : {"global", "shard"}) {
    SCOPED_TRACE(order);
    const SamplerOptions o = make_options(order, 1000, false);
    const auto e0 = flatten(epoch_batches(1000, 100, 2, 1, o, 0));
    EXPECT_EQ(flatten(epoch_batches(1000, 100, 2, 1, o, 0)), e0);
    EXPECT_NE(flatten(epoch_batches(1000, 100, 2, 1, o, 1)), e0);
    EXPECT_NE(flatten(epoch_batches(1000, 100, 2, 2, o, 0)), e0);
    // One shard: only the windows' shuffles vary, and they too are new each epoch.
    SamplerOptions one_shard;
    one_shard.order = SampleOrder::shard;
    one_shard.shard_sizes = {1000};
    one_shard.window = 100;
    EXPECT_NE(flatten(epoch_batches(1000, 100, 1, 1, one_shard, 0)),
              flatten(epoch_batches(1000, 100, 1, 1, one_shard, 1)));
    // The two orders differ too.
    EXPECT_NE(flatten(epoch_batches(1000, 100, 2, 1, make_options("global", 1000, false), 0)),
              flatten(epoch_batches(1000, 100, 2, 1, make_options("shard", 1000, false), 0)));
  }
}

TEST(Sampler, BatchesDoNotDependOnWhatWasAskedBefore) {
  // The sampler keeps one epoch's order; going back to an earlier epoch
  // rebuilds the same one.
  Sampler a(300, 20, 1, 2, 7), b(300, 20, 1, 2, 7);
  std::vector<int64_t> first, again, other;
  a.batch_indices(0, 4, first);
  a.batch_indices(3, 4, other);
  a.batch_indices(0, 4, again);
  EXPECT_EQ(first, again);
  b.batch_indices(3, 4, again);
  EXPECT_EQ(other, again);
}

TEST(Sampler, ResumeMidEpochGivesTheRemainingOrder) {
  for (const char* order : {"global", "shard"})
    for (bool pad : {false, true}) {
      SCOPED_TRACE(::testing::Message() << order << " pad " << pad);
      const int64_t n = 1003, g = 60;
      const SamplerOptions o = make_options(order, n, pad, 32);
      // The uninterrupted run: every global batch of epochs 0-2, world 2.
      std::vector<std::vector<int64_t>> run;
      for (int64_t e = 0; e < 3; ++e)
        for (auto& batch : epoch_batches(n, g, 2, 11, o, e)) run.push_back(batch);
      // Interrupted after `stop` steps, resumed from the stored position by
      // fresh samplers, on 3 ranks.
      const Sampler probe(n, g, 0, 1, 11, o);
      const int64_t per_epoch = probe.batches_per_epoch();
      for (int64_t stop : {int64_t{0}, int64_t{7}, per_epoch, per_epoch + 5}) {
        const SamplerPosition at = probe.position_of(stop);
        EXPECT_EQ(probe.step_of(at), stop);
        EXPECT_LT(at.batch, probe.batches_per_epoch());
        std::vector<Sampler> ranks;
        for (int r = 0; r < 3; ++r) ranks.emplace_back(n, g, r, 3, 11, o);
        std::vector<int64_t> idx;
        for (int64_t step = stop; step < int64_t(run.size()); ++step) {
          const SamplerPosition p = ranks[0].position_of(step);
          std::vector<int64_t> batch;
          for (auto& s : ranks) {
            s.batch_indices(p.epoch, p.batch, idx);
            batch.insert(batch.end(), idx.begin(), idx.end());
          }
          ASSERT_EQ(batch, run[size_t(step)]) << "step " << step << " resumed at " << stop;
        }
      }
    }
}

TEST(Sampler, PadCompletesTheLastBatchFromTheStartOfTheOrder) {
  SamplerOptions pad;
  pad.pad_last = true;
  Sampler drop_sampler(10, 4, 0, 1, 3), pad_sampler(10, 4, 0, 1, 3, pad);
  EXPECT_EQ(drop_sampler.batches_per_epoch(), 2);
  EXPECT_EQ(pad_sampler.batches_per_epoch(), 3);
  std::vector<int64_t> order, idx;
  for (int64_t b = 0; b < 3; ++b) {
    pad_sampler.batch_indices(0, b, idx);
    order.insert(order.end(), idx.begin(), idx.end());
    if (b < 2) {  // the full batches are the same under either policy
      std::vector<int64_t> dropped;
      drop_sampler.batch_indices(0, b, dropped);
      EXPECT_EQ(dropped, idx);
    }
  }
  EXPECT_EQ((std::vector<int64_t>{order[8], order[9], order[0], order[1]}),
            (std::vector<int64_t>(order.begin() + 8, order.end())));
  EXPECT_EQ(order[10], order[0]);
  EXPECT_EQ(order[11], order[1]);
}

// Equal shards, window = one shard: a window is exactly one shard's samples
// (shuffled), so a global batch no larger than a shard reads at most 2 shards.
TEST(Sampler, ShardOrderReadsFewShardsPerBatch) {
  const int64_t shard = 50, shards = 9, n = shard * shards, g = 32;
  auto shard_of = [&](int64_t i) { return i / shard; };
  for (int64_t window : {int64_t{0}, 2 * shard}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    SamplerOptions o;
    o.order = SampleOrder::shard;
    o.shard_sizes.assign(size_t(shards), shard);
    o.window = window;
    const int64_t w = window == 0 ? shard : window;
    for (int world : {1, 3}) {
      const auto batches = epoch_batches(n, g, world, 21, o, 2);
      const auto all = flatten(batches);
      // Each window holds whole shards: w / shard of them.
      for (int64_t begin = 0; begin + w <= int64_t(all.size()); begin += w) {
        std::set<int64_t> touched;
        for (int64_t p = begin; p < begin + w; ++p) touched.insert(shard_of(all[size_t(p)]));
        EXPECT_EQ(int64_t(touched.size()), w / shard) << "window at " << begin;
      }
      // A batch spans at most two neighbouring windows.
      for (const auto& batch : batches) {
        std::set<int64_t> touched;
        for (int64_t i : batch) touched.insert(shard_of(i));
        EXPECT_LE(int64_t(touched.size()), 2 * w / shard);
      }
    }
  }
  // The shard order itself is shuffled anew every epoch: with window = one
  // shard, window k is shard order[k].
  SamplerOptions o;
  o.order = SampleOrder::shard;
  o.shard_sizes.assign(size_t(shards), shard);
  SamplerOptions pad = o;
  pad.pad_last = true;
  std::set<std::vector<int64_t>> shard_orders;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    const auto all = flatten(epoch_batches(n, g, 1, 21, pad, epoch));
    std::vector<int64_t> shard_order;
    for (int64_t k = 0; k < shards; ++k) shard_order.push_back(shard_of(all[size_t(k * shard)]));
    EXPECT_TRUE(std::is_permutation(shard_order.begin(), shard_order.end(),
                                    std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}.begin()));
    shard_orders.insert(shard_order);
  }
  EXPECT_EQ(shard_orders.size(), 4u);
  // The global order, for contrast, reads nearly every shard in every batch.
  const auto global = epoch_batches(n, g, 1, 21, {}, 2);
  std::set<int64_t> touched;
  for (int64_t i : global[0]) touched.insert(shard_of(i));
  EXPECT_GT(touched.size(), 5u);
}

// Uneven shards (one empty): a batch no larger than a window spans at most
// two windows, 2w consecutive samples of the shards laid end to end, so the
// shards it reads hold at most 2w samples besides the two at the ends of that
// run (counted here as the two largest). And a window is shuffled.
TEST(Sampler, ShardOrderLocalityWithUnevenShards) {
  const int64_t n = 1003, g = 24;
  const std::vector<int64_t> sizes = uneven_shards(n);
  std::vector<int64_t> shard_of;
  for (size_t s = 0; s < sizes.size(); ++s) shard_of.insert(shard_of.end(), size_t(sizes[s]), int64_t(s));
  const int64_t w = *std::max_element(sizes.begin(), sizes.end());
  SamplerOptions o;
  o.order = SampleOrder::shard;
  o.shard_sizes = sizes;
  for (int64_t epoch : {0, 1, 2}) {
    const auto batches = epoch_batches(n, g, 4, 8, o, epoch);
    for (const auto& batch : batches) {
      std::set<int64_t> touched;
      for (int64_t i : batch) touched.insert(shard_of[size_t(i)]);
      std::vector<int64_t> held;
      for (int64_t s : touched) held.push_back(sizes[size_t(s)]);
      std::sort(held.begin(), held.end(), std::greater<>());
      const int64_t inner =
          std::accumulate(held.begin() + std::min<ptrdiff_t>(2, ptrdiff_t(held.size())), held.end(), int64_t{0});
      EXPECT_LE(inner, 2 * w) << "epoch " << epoch;
    }
    const auto all = flatten(batches);
    EXPECT_FALSE(std::is_sorted(all.begin(), all.begin() + w));
  }
}

TEST(Sampler, UnevenSlicesDifferByAtMostOne) {
  std::vector<int64_t> sizes;
  for (int r = 0; r < 3; ++r) sizes.push_back(Sampler(100, 10, r, 3, 0).local_batch());
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 4}));
}

TEST(Sampler, OptionsFromTheDataConfig) {
  LoaderOptions l;
  l.order = SampleOrder::shard;
  l.shuffle_window = 64;
  l.last_batch = LastBatch::pad;
  const SamplerOptions o = sampler_options(l, {10, 20});
  EXPECT_EQ(o.order, SampleOrder::shard);
  EXPECT_EQ(o.shard_sizes, (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(o.window, 64);
  EXPECT_TRUE(o.pad_last);
  EXPECT_FALSE(sampler_options(LoaderOptions{}, {}).pad_last);
  EXPECT_EQ(sampler_options(LoaderOptions{}, {}).order, SampleOrder::global);
  // Window 0 is the largest shard.
  l.last_batch = LastBatch::drop;
  l.shuffle_window = 0;
  EXPECT_EQ(Sampler(30, 10, 0, 1, 0, sampler_options(l, {10, 20})).options().window, 20);
}

TEST(Sampler, BadArgumentsAreErrors) {
  EXPECT_THROW(Sampler(10, 20, 0, 1, 0), Error);  // fewer samples than a batch
  EXPECT_THROW(Sampler(100, 2, 0, 4, 0), Error);  // batch smaller than the world
  EXPECT_THROW(Sampler(100, 10, 4, 4, 0), Error);
  Sampler s(100, 10, 0, 1, 0);
  std::vector<int64_t> idx;
  EXPECT_THROW(s.batch_indices(0, 10, idx), Error);
  EXPECT_THROW(s.batch_indices(-1, 0, idx), Error);
  EXPECT_THROW(s.position_of(-1), Error);

  auto message = [](const SamplerOptions& o) -> std::string {
    try {
      Sampler(100, 10, 0, 1, 0, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  SamplerOptions o;
  o.order = SampleOrder::shard;  // no shard sizes
  EXPECT_NE(message(o).find("data.order"), std::string::npos) << message(o);
  o.shard_sizes = {50, 49};  // not the split's 100 samples
  EXPECT_NE(message(o).find("99 samples"), std::string::npos) << message(o);
  o.shard_sizes = {50, 50};
  o.window = -1;
  EXPECT_NE(message(o).find("data.shuffle_window"), std::string::npos) << message(o);
  o.window = 0;
  EXPECT_EQ(message(o), "no error");
}

// 10M samples: an epoch's order builds in well under a second (Release).
TEST(Sampler, LargeEpochsBuildQuickly) {
  const int64_t n = 10'000'000;
  SamplerOptions shard;
  shard.order = SampleOrder::shard;
  shard.shard_sizes.assign(100, n / 100);
  for (const SamplerOptions& o : {SamplerOptions{}, shard}) {
    Sampler s(n, n, 0, 1, 1, o);  // one global batch: the whole order
    std::vector<int64_t> all;
    const double t0 = now_seconds();
    s.batch_indices(0, 0, all);
    const double seconds = now_seconds() - t0;
    std::printf("[ info ] order %s: %lld samples in %.3f s\n", std::string(name_of(o.order)).c_str(),
                static_cast<long long>(n), seconds);
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t i : all) seen[size_t(i)] = true;
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    EXPECT_LT(seconds, 2.0);  // ~0.2-0.5 s; slack for a loaded machine
#endif
  }
}
