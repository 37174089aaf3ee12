// Language-model batches: windows of T+1 token ids (uint8, uint16 or int32)
// become int32 inputs (the first T) and next-token labels (ids 1..T),
// without normalization; the same ids give the same batch whatever width
// they are stored at.
#include "runtime/train/lm_batch.h"

#include "runtime/core/error.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::train;

namespace {

template <typename Id>
io::RawSamples view(const std::vector<Id>& ids, io::SampleDType dtype) {
  return {reinterpret_cast<const uint8_t*>(ids.data()), dtype};
}

}  // namespace

TEST(LmBatch, InputsAreTheFirstTBytesAndLabelsTheNextOnes) {
  const int64_t n = 3, T = 4;
  // Window i holds bytes 10*i + 0..4, plus bytes above 127 in the last one:
  // ids are unsigned bytes, never negative.
  std::vector<uint8_t> windows = {0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 200, 201, 202, 254, 255};
  std::vector<int32_t> x(size_t(n * T), -1), labels(size_t(n * T), -1);
  lm_batch_from_windows(view(windows, io::SampleDType::u8), n, T, x.data(), labels.data());
  EXPECT_EQ(x, (std::vector<int32_t>{0, 1, 2, 3, 10, 11, 12, 13, 200, 201, 202, 254}));
  EXPECT_EQ(labels, (std::vector<int32_t>{1, 2, 3, 4, 11, 12, 13, 14, 201, 202, 254, 255}));
}

TEST(LmBatch, LabelIsTheTokenAfterItsInputPosition) {
  const int64_t n = 5, T = 7;
  std::vector<uint8_t> windows(size_t(n * (T + 1)));
  for (size_t i = 0; i < windows.size(); ++i) windows[i] = uint8_t(i * 37 + 5);
  std::vector<int32_t> x(size_t(n * T)), labels(size_t(n * T));
  lm_batch_from_windows(view(windows, io::SampleDType::u8), n, T, x.data(), labels.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[size_t(i * T + t)], windows[size_t(i * (T + 1) + t)]);
      EXPECT_EQ(labels[size_t(i * T + t)], windows[size_t(i * (T + 1) + t + 1)]);
      if (t + 1 < T) {
        EXPECT_EQ(labels[size_t(i * T + t)], x[size_t(i * T + t + 1)]);  // shifted by one
      }
    }
}

TEST(LmBatch, WiderTokensGiveTheSameBatchAsBytes) {
  const int64_t n = 4, T = 9;
  std::vector<uint8_t> bytes(size_t(n * (T + 1)));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 91 + 3);
  const std::vector<uint16_t> u16(bytes.begin(), bytes.end());
  const std::vector<int32_t> i32(bytes.begin(), bytes.end());
  std::vector<int32_t> x8(size_t(n * T)), l8(x8.size()), x16(x8.size()), l16(x8.size()), x32(x8.size()), l32(x8.size());
  lm_batch_from_windows(view(bytes, io::SampleDType::u8), n, T, x8.data(), l8.data());
  lm_batch_from_windows(view(u16, io::SampleDType::u16), n, T, x16.data(), l16.data());
  lm_batch_from_windows(view(i32, io::SampleDType::i32), n, T, x32.data(), l32.data());
  EXPECT_EQ(x16, x8);
  EXPECT_EQ(l16, l8);
  EXPECT_EQ(x32, x8);
  EXPECT_EQ(l32, l8);
}

TEST(LmBatch, IdsBeyondAByte) {
  // GPT-2's vocabulary: ids up to 50256 in uint16 (and up to 65535, never
  // negative); larger ones in int32.
  const std::vector<uint16_t> u16{0, 50256, 65535, 256, 1, 40000};
  std::vector<int32_t> x(4), labels(4);
  lm_batch_from_windows(view(u16, io::SampleDType::u16), 2, 2, x.data(), labels.data());
  EXPECT_EQ(x, (std::vector<int32_t>{0, 50256, 256, 1}));
  EXPECT_EQ(labels, (std::vector<int32_t>{50256, 65535, 1, 40000}));

  const std::vector<int32_t> i32{70000, 1 << 30, 5};
  lm_batch_from_windows(view(i32, io::SampleDType::i32), 1, 2, x.data(), labels.data());
  EXPECT_EQ(x[0], 70000);
  EXPECT_EQ(x[1], 1 << 30);
  EXPECT_EQ(labels[0], 1 << 30);
  EXPECT_EQ(labels[1], 5);
}

TEST(LmBatch, FloatSamplesAreNotTokenIds) {
  const std::vector<float> f{1.0f, 2.0f};
  std::vector<int32_t> x(1), labels(1);
  EXPECT_THROW(lm_batch_from_windows(view(f, io::SampleDType::f32), 1, 1, x.data(), labels.data()), Error);
}
