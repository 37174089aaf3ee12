// `prep text`: byte windows of T+1, the last ones the test split, readable
// as format v1 splits whose raw bytes are the text.
#include "io/dataset.h"
#include "io/text_dataset.h"
#include "io_test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <string>

using namespace shardtrain;
using namespace shardtrain::io;
using shardtrain::io::testing::TempDir;

TEST(TextDataset, WindowsAreNonOverlappingAndDropTheRemainder) {
  const std::vector<uint8_t> text = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
  std::vector<uint8_t> windows;
  EXPECT_EQ(text_windows(text, 2, &windows), 2);  // "abc", "def"; "gh" dropped
  EXPECT_EQ(windows, (std::vector<uint8_t>{'a', 'b', 'c', 'd', 'e', 'f'}));
  EXPECT_THROW(text_windows(text, 0, &windows), Error);
}

TEST(TextDataset, PrepWritesTrainThenTestSplitsOfTheText) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char(' ' + i % 90);
  text += "\xff\x80";  // bytes above 127 are tokens too
  { std::ofstream(dir / "corpus.txt", std::ios::binary) << text; }
  TextPrepOptions o;
  o.out_dir = dir / "out";
  o.input = dir / "corpus.txt";
  o.block_size = 9;  // windows of 10 bytes: 100 of them
  o.test_fraction = 0.2;
  const TextPrepSummary s = prep_text(o);
  EXPECT_EQ(s.corpus_bytes, 1002);
  EXPECT_EQ(s.train_samples, 80);
  EXPECT_EQ(s.test_samples, 20);

  int64_t offset = 0;
  for (const char* split : {"train", "test"}) {
    const InMemoryDataset ds = InMemoryDataset::load(dir / ("out/" + std::string(split)));
    EXPECT_EQ(ds.info().sample_shape, Shape{10});
    EXPECT_EQ(ds.info().num_classes, 256);
    EXPECT_EQ(ds.info().split, split);
    std::vector<int64_t> idx(size_t(ds.size()));
    std::iota(idx.begin(), idx.end(), 0);
    std::vector<uint8_t> x(size_t(ds.size() * 10));
    std::vector<int32_t> y(size_t(ds.size()));
    ds.gather_bytes(idx.data(), ds.size(), x.data(), y.data());
    EXPECT_EQ(std::string(x.begin(), x.end()), text.substr(size_t(offset), x.size())) << split;
    for (int64_t i = 0; i < ds.size(); ++i) EXPECT_EQ(y[size_t(i)], x[size_t(i * 10 + 9)]);  // the last byte
    offset += int64_t(x.size());
  }
  // Too little text for both splits; a missing file.
  o.block_size = 600;
  o.out_dir = dir / "small";
  EXPECT_THROW(prep_text(o), Error);
  o.input = dir / "missing.txt";
  EXPECT_THROW(prep_text(o), Error);
}
