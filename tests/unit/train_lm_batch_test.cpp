// Language-model batches: windows of T+1 byte tokens become int32 inputs
// (the first T) and next-token labels (bytes 1..T), without normalization.
#include "runtime/train/lm_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace shardtrain::train;

TEST(LmBatch, InputsAreTheFirstTBytesAndLabelsTheNextOnes) {
  const int64_t n = 3, T = 4;
  // Window i holds bytes 10*i + 0..4, plus bytes above 127 in the last one:
  // ids are unsigned bytes, never negative.
  std::vector<uint8_t> windows = {0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 200, 201, 202, 254, 255};
  std::vector<int32_t> x(size_t(n * T), -1), labels(size_t(n * T), -1);
  lm_batch_from_windows(windows.data(), n, T, x.data(), labels.data());
  EXPECT_EQ(x, (std::vector<int32_t>{0, 1, 2, 3, 10, 11, 12, 13, 200, 201, 202, 254}));
  EXPECT_EQ(labels, (std::vector<int32_t>{1, 2, 3, 4, 11, 12, 13, 14, 201, 202, 254, 255}));
}

TEST(LmBatch, LabelIsTheTokenAfterItsInputPosition) {
  const int64_t n = 5, T = 7;
  std::vector<uint8_t> windows(size_t(n * (T + 1)));
  for (size_t i = 0; i < windows.size(); ++i) windows[i] = uint8_t(i * 37 + 5);
  std::vector<int32_t> x(size_t(n * T)), labels(size_t(n * T));
  lm_batch_from_windows(windows.data(), n, T, x.data(), labels.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[size_t(i * T + t)], windows[size_t(i * (T + 1) + t)]);
      EXPECT_EQ(labels[size_t(i * T + t)], windows[size_t(i * (T + 1) + t + 1)]);
      if (t + 1 < T) {
        EXPECT_EQ(labels[size_t(i * T + t)], x[size_t(i * T + t + 1)]);  // shifted by one
      }
    }
}
