#include "kernels/cpu/embedding.h"

#include "runtime/core/error.h"
#include "tests/unit/kernels_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::uniform_vector;

constexpr int64_t V = 6, C = 5;

TEST(Embedding, ForwardGathersRows) {
  const auto table = uniform_vector(V * C, 1);
  const std::vector<int32_t> ids = {3, 0, 3, 5};
  std::vector<float> out(ids.size() * C);
  embedding_forward(out.data(), ids.data(), table.data(), int64_t(ids.size()), V, C);
  for (size_t n = 0; n < ids.size(); ++n)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(out[n * C + c], table[ids[n] * C + c]);
}

TEST(Embedding, BackwardMatchesFiniteDifferencesWithRepeatedIds) {
  auto table = uniform_vector(V * C, 2);
  const std::vector<int32_t> ids = {1, 4, 1, 1, 0, 4};  // ids 2, 3, 5 unused: zero gradient
  const int64_t N = int64_t(ids.size());
  const auto R = uniform_vector(N * C, 3);
  std::vector<float> out(N * C), dtable(V * C, std::numeric_limits<float>::quiet_NaN());
  embedding_backward(dtable.data(), R.data(), ids.data(), N, V, C, false);
  expect_gradient(
      table, dtable,
      [&] {
        embedding_forward(out.data(), ids.data(), table.data(), N, V, C);
        return dot(out, R);
      },
      1e-2f, 1e-4, "dtable");
  for (int64_t c = 0; c < C; ++c) {
    // Row 1 is the sum of dout rows 0, 2, 3 in that order (bit-exact).
    EXPECT_EQ(dtable[1 * C + c], (R[0 * C + c] + R[2 * C + c]) + R[3 * C + c]);
    EXPECT_EQ(dtable[3 * C + c], 0.0f);
  }
}

TEST(Embedding, AccumulateAdds) {
  const std::vector<int32_t> ids = {2, 2, 0};
  const auto dout = uniform_vector(ids.size() * C, 4);
  auto dtable = uniform_vector(V * C, 5);
  const auto before = dtable;
  embedding_backward(dtable.data(), dout.data(), ids.data(), 3, V, C, true);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(dtable[2 * C + c], (before[2 * C + c] + dout[c]) + dout[C + c]);
    EXPECT_EQ(dtable[0 * C + c], before[c] + dout[2 * C + c]);
    EXPECT_EQ(dtable[5 * C + c], before[5 * C + c]);
  }
}

TEST(Embedding, PositionEmbeddingAddsRowsAndBackwardSumsOverBatch) {
  const int64_t B = 3, T = 4, rows = 6;
  auto table = uniform_vector(rows * C, 20);
  const auto base = uniform_vector(B * T * C, 21), R = uniform_vector(B * T * C, 22);
  std::vector<float> out(base.size());
  auto loss = [&] {
    out = base;
    position_embedding_add(out.data(), table.data(), B, T, C);
    return dot(out, R);
  };
  loss();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) EXPECT_EQ(out[(b * T + t) * C + c], base[(b * T + t) * C + c] + table[t * C + c]);
  std::vector<float> dtable(rows * C, std::numeric_limits<float>::quiet_NaN());
  position_embedding_backward(dtable.data(), R.data(), B, T, C, rows, false);
  for (int64_t i = T * C; i < rows * C; ++i) EXPECT_EQ(dtable[i], 0.0f) << i;  // unused rows
  // Only rows < T have a nonzero gradient; check the whole table (zeros included).
  std::vector<float> used(table.begin(), table.begin() + T * C);
  std::vector<float> dused(dtable.begin(), dtable.begin() + T * C);
  auto loss_used = [&] {
    std::copy(used.begin(), used.end(), table.begin());
    return loss();
  };
  expect_gradient(used, dused, loss_used, 1e-2f, 1e-3, "dwpe");
  auto acc = dtable;
  position_embedding_backward(acc.data(), R.data(), B, T, C, rows, true);
  for (size_t i = 0; i < acc.size(); ++i) EXPECT_FLOAT_EQ(acc[i], 2 * dtable[i]) << i;
}

TEST(Embedding, OutOfRangeIdIsAnErrorNamingPositionAndId) {
  const auto table = uniform_vector(V * C, 6);
  std::vector<float> out(3 * C), dtable(V * C, 1.0f);
  for (int32_t bad : {int32_t(V), -1}) {
    const std::vector<int32_t> ids = {0, bad, 1};
    try {
      embedding_forward(out.data(), ids.data(), table.data(), 3, V, C);
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("id " + std::to_string(bad)));
      EXPECT_THAT(e.what(), ::testing::HasSubstr("position 1"));
    }
    EXPECT_THROW(embedding_backward(dtable.data(), out.data(), ids.data(), 3, V, C, true), Error);
    // Checked before any write: the accumulated gradient is untouched.
    EXPECT_EQ(dtable, std::vector<float>(V * C, 1.0f));
    // The check a GPU's batch gets on the host, with the same message.
    try {
      check_embedding_ids(ids.data(), 3, V);
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.what(),
                "embedding: id " + std::to_string(bad) + " at position 1 is outside [0, " + std::to_string(V) + ")");
    }
  }
}

}  // namespace
}  // namespace shardtrain::cpu
