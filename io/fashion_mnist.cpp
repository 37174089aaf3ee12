#include "io/fashion_mnist.h"

#include "io/dataset_writer.h"
#include "io/idx_reader.h"
#include "io/manifest.h"
#include "io/shard_format.h"
#include "runtime/core/error.h"

#include <filesystem>

namespace shardtrain::io {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 28, kCols = 28;
constexpr int32_t kClasses = 10;
// Mean and standard deviation of the training pixels scaled to [0, 1], the
// usual Fashion-MNIST normalization.
constexpr float kMean = 0.2860f, kStd = 0.3530f;

struct Split {
  std::string name;  // "train" / "test": the split attribute and directory
  IdxArray images, labels;
  int64_t size() const { return labels.dims[0]; }
};

Split read_split(const std::string& source_dir, const std::string& name, const std::string& prefix) {
  const std::string images_path = (fs::path(source_dir) / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels_path = (fs::path(source_dir) / (prefix + "-labels-idx1-ubyte.gz")).string();
  Split split{name, read_idx_gz(images_path, kIdxImagesMagic), read_idx_gz(labels_path, kIdxLabelsMagic)};

  const std::vector<int64_t>& dims = split.images.dims;
  ST_CHECK(dims[1] == kRows && dims[2] == kCols, "{}: images are {}x{}, Fashion-MNIST's are {}x{}", images_path,
           dims[1], dims[2], kRows, kCols);
  ST_CHECK(dims[0] == split.labels.dims[0], "{} has {} images but {} has {} labels", images_path, dims[0], labels_path,
           split.labels.dims[0]);
  for (size_t i = 0; i < split.labels.data.size(); ++i) {
    ST_CHECK(split.labels.data[i] < kClasses, "{}: label {} of sample {} is not a class in [0, {})", labels_path,
             split.labels.data[i], i, kClasses);
  }
  return split;
}

void write_split(const Split& split, const std::string& out_dir, int shards,
                 const std::function<void(const std::string&)>& progress) {
  const fs::path dir = fs::path(out_dir) / split.name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  ST_CHECK(!ec, "{}: cannot create directory: {}", dir.string(), ec.message());

  // The old manifest goes first: an interrupted run then leaves a split
  // without one rather than one that describes other files.
  fs::remove(manifest_path(dir.string()), ec);
  ST_CHECK(!ec, "{}: cannot remove the old manifest: {}", manifest_path(dir.string()), ec.message());

  const int64_t n = split.size();
  const int64_t sample_bytes = kRows * kCols;
  for (int s = 0; s < shards; ++s) {
    // Contiguous ranges in the original order, sizes differing by at most one.
    const int64_t begin = n * s / shards, end = n * (s + 1) / shards;
    shard_format::ShardHeader header;
    header.split = split.name;
    header.num_classes = kClasses;
    header.shard_index = s;
    header.num_shards = shards;
    header.num_samples = end - begin;
    header.sample_shape = Shape{1, kRows, kCols};
    header.dtype = SampleDType::u8;
    header.normalize_mean = kMean;
    header.normalize_std = kStd;

    std::vector<int32_t> labels(split.labels.data.begin() + begin, split.labels.data.begin() + end);
    const std::string path = (dir / shard_format::shard_file_name(s)).string();
    write_shard(path, header, split.images.data.data() + begin * sample_bytes, labels.data());
    if (progress) progress(fmt::format("wrote {} ({} samples)", path, end - begin));
  }
  remove_stale_shards(dir.string(), shards);
  write_split_manifest(dir.string());
  if (progress) progress(fmt::format("wrote {}", manifest_path(dir.string())));
}

}  // namespace

PrepSummary prep_fashion_mnist(const FashionMnistPrepOptions& options,
                               const std::function<void(const std::string&)>& progress) {
  ST_CHECK(options.shards >= 1, "prep fashion-mnist: shards is {}, it must be >= 1", options.shards);

  // Read and check all four inputs before writing anything, so that a bad
  // test file does not leave a new train split next to an old test split.
  const Split train = read_split(options.source_dir, "train", "train");
  const Split test = read_split(options.source_dir, "test", "t10k");
  for (const Split* split : {&train, &test}) {
    ST_CHECK(options.shards <= split->size(),
             "prep fashion-mnist: shards is {} but the {} split has only {} samples (one at least per shard)",
             options.shards, split->name, split->size());
  }

  write_split(train, options.out_dir, options.shards, progress);
  write_split(test, options.out_dir, options.shards, progress);
  return PrepSummary{train.size(), test.size(), options.shards};
}

}  // namespace shardtrain::io
