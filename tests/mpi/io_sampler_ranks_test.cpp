// The sampler across real ranks (run with 1-4): every rank computes its
// indices of a whole epoch, rank 0 gathers them with plain MPI and checks that
// the ranks together saw every sample exactly once (drop: all but the n % G
// left over; pad: the first G - n % G of the order twice), each global batch
// split disjointly, and that the gathered batches are those a single-rank
// sampler computes (the same seed gives the same batches whatever the world
// size).
#include "io/sampler.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace shardtrain::io;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// All ranks' indices of every batch of `epoch`, on rank 0 (in rank order per
// batch: the global batch); empty elsewhere.
std::vector<std::vector<int64_t>> gather_epoch(Sampler& s, int64_t epoch) {
  const int p = world_size();
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> mine, all(size_t(s.global_batch()));
  std::vector<int> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {  // each rank's slice, as Sampler splits it
    displs[size_t(r)] = int(s.global_batch() * r / p);
    counts[size_t(r)] = int(s.global_batch() * (r + 1) / p) - displs[size_t(r)];
  }
  for (int64_t b = 0; b < s.batches_per_epoch(); ++b) {
    s.batch_indices(epoch, b, mine);
    EXPECT_EQ(int64_t(mine.size()), counts[size_t(world_rank())]);
    MPI_Gatherv(mine.data(), int(mine.size()), MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T, 0,
                MPI_COMM_WORLD);
    if (world_rank() == 0) batches.push_back(all);
  }
  return batches;
}

void check_epoch(int64_t n, int64_t g, const SamplerOptions& o, int64_t epoch) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " G " << g << " order " << shardtrain::name_of(o.order) << " pad "
                                    << o.pad_last << " epoch " << epoch << " ranks " << world_size());
  Sampler s(n, g, world_rank(), world_size(), 42, o);
  const auto batches = gather_epoch(s, epoch);
  if (world_rank() != 0) return;

  std::map<int64_t, int> seen;
  std::vector<int64_t> order;
  for (const auto& batch : batches) {
    EXPECT_EQ(std::set<int64_t>(batch.begin(), batch.end()).size(), batch.size()) << "ranks overlap";
    for (int64_t i : batch) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, n);
      ++seen[i];
    }
    order.insert(order.end(), batch.begin(), batch.end());
  }
  const int64_t remainder = n % g;
  if (o.pad_last) {
    const int64_t padded = remainder == 0 ? 0 : g - remainder;
    EXPECT_EQ(int64_t(seen.size()), n);
    std::set<int64_t> twice;
    for (const auto& [i, count] : seen)
      if (count > 1) twice.insert(i);
    EXPECT_EQ(twice, std::set<int64_t>(order.begin(), order.begin() + padded));
    EXPECT_EQ(int64_t(order.size()), n + padded);
  } else {
    EXPECT_EQ(int64_t(seen.size()), n - remainder);
    EXPECT_EQ(int64_t(order.size()), n - remainder);  // so each exactly once
  }

  // The same global batches as one rank alone.
  Sampler alone(n, g, 0, 1, 42, o);
  std::vector<int64_t> expected;
  for (int64_t b = 0; b < alone.batches_per_epoch(); ++b) {
    alone.batch_indices(epoch, b, expected);
    EXPECT_EQ(batches[size_t(b)], expected) << "batch " << b;
  }
}

}  // namespace

TEST(SamplerMpi, ExactlyOncePerEpochAcrossRanks) {
  // Sample counts not divisible by the global batch (and one that is), global
  // batches not divisible by 2, 3 or 4 ranks.
  const std::pair<int64_t, int64_t> cases[] = {{1003, 64}, {100, 7}, {257, 10}, {120, 12}};
  for (const SampleOrder order : {SampleOrder::global, SampleOrder::shard})
    for (bool pad : {false, true})
      for (const auto& [n, g] : cases)
        for (int64_t epoch : {0, 3}) {
          SamplerOptions o;
          o.order = order;
          o.pad_last = pad;
          if (o.order == SampleOrder::shard) {  // uneven shards, the last one short
            for (int64_t left = n; left > 0; left -= o.shard_sizes.back())
              o.shard_sizes.push_back(std::min<int64_t>(left, 17 + int64_t(o.shard_sizes.size()) % 5 * 9));
          }
          check_epoch(n, g, o, epoch);
        }
}
