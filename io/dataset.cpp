#include "io/dataset.h"

#include "io/manifest.h"
#include "io/normalize.h"
#include "io/shard_reader.h"
#include "io/shard_set.h"
#include "kernels/cpu/elementwise.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <new>

namespace shardtrain::io {

InMemoryDataset InMemoryDataset::load(const std::string& path, int64_t limit, bool verify) {
  ST_CHECK(limit >= 0, "{}: limit {} must be >= 0 (0 reads all samples)", path, limit);

  // A split with a manifest must still match it: a missing, truncated,
  // added or rewritten shard is reported as such, naming the shard, before
  // HDF5 sees the file. (A single-file split has no manifest.)
  // With `verify`, every shard's bytes are checked before HDF5 parses any of
  // them: libhdf5 can hang or crash on corrupt metadata (docs/reliability.md);
  // the second read of each file is served by the page cache.
  std::optional<Manifest> manifest;
  if (std::filesystem::is_directory(path)) manifest = read_manifest(path);
  if (manifest) {
    check_manifest_lists_files(path, *manifest);
    if (verify)
      for (const ManifestShard& shard : manifest->shards)
        verify_shard((std::filesystem::path(path) / shard.file).string(), shard);
    check_manifest_against_files(path, *manifest);
  }

  // Validate every shard's header before reading any data: a schema problem
  // in the last shard should not cost the time of reading the first ones.
  const std::vector<ShardHeaderOf> shards = read_shard_headers(shard_format::list_shard_files(path));
  check_shard_set(path, shards);

  const shard_format::ShardHeader& h0 = shards.front().header;
  int64_t total = 0;
  for (const ShardHeaderOf& shard : shards) total += shard.header.num_samples;
  ST_CHECK(total > 0, "{}: the split has no samples", path);

  InMemoryDataset ds;
  DatasetInfo& info = ds.info_;
  info.path = path;
  for (const ShardHeaderOf& shard : shards) info.shard_files.push_back(shard.path);
  info.split = h0.split;
  info.num_samples = limit > 0 ? std::min(limit, total) : total;
  for (int64_t left = info.num_samples; const ShardHeaderOf& shard : shards) {  // the limit cuts the last shards
    info.shard_sizes.push_back(std::min(left, shard.header.num_samples));
    left -= info.shard_sizes.back();
  }
  info.sample_shape = h0.sample_shape;
  info.dtype = h0.dtype;
  info.num_classes = h0.num_classes;
  info.normalize_mean = h0.normalize_mean;
  info.normalize_std = h0.normalize_std;
  info.checksums_verified = verify && manifest.has_value();
  info.samples_verified = verify && h0.version >= 2;

  const size_t sample_bytes = info.sample_bytes();
  try {
    ds.x_.resize(size_t(info.num_samples) * sample_bytes);
    ds.y_.resize(size_t(info.num_samples));
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: cannot hold {} samples ({:.2f} GiB) in memory; set a limit", path, info.num_samples,
                            double(info.num_samples) * double(sample_bytes) / (1 << 30)));
  }

  // Every label is validated, also beyond the limit: a data set that loads
  // with a limit must not fail later without one.
  int64_t filled = 0;
  for (const ShardHeaderOf& h : shards) {
    const ShardReader shard(h.path);
    const std::vector<int32_t> labels = shard.read_labels();
    const int64_t take = std::min(shard.header().num_samples, info.num_samples - filled);
    if (take <= 0) continue;
    uint8_t* x = ds.x_.data() + size_t(filled) * sample_bytes;
    shard.read_x(0, take, x);
    if (verify) {  // version 2: every sample against its own checksum
      const std::vector<uint32_t> crcs = shard.read_checksums();
      if (!crcs.empty())
        shard_format::verify_samples(
            shard.path(), x, sample_bytes, take, [](int64_t k) { return k; }, labels, crcs);
    }
    std::copy_n(labels.begin(), take, ds.y_.begin() + filled);
    filled += take;
  }
  ST_ASSERT(filled == info.num_samples);
  return ds;
}

size_t DatasetInfo::sample_bytes() const { return size_t(sample_numel()) * shard_format::dtype_size(dtype); }

void InMemoryDataset::gather(const int64_t* indices, int64_t n, float* x_out, int32_t* y_out) const {
  const int64_t numel = info_.sample_numel();
  const size_t sample_bytes = info_.sample_bytes();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t index = indices[i];
    ST_CHECK(index >= 0 && index < size(), "{}: sample index {} is out of range [0, {})", info_.path, index, size());
    normalize_sample(info_, x_.data() + size_t(index) * sample_bytes, x_out + i * numel);
    y_out[i] = y_[size_t(index)];
  }
}

void InMemoryDataset::gather_bytes(const int64_t* indices, int64_t n, uint8_t* x_out, int32_t* y_out) const {
  ST_CHECK(holds_token_ids(info_.dtype),
           "{}: raw samples (token ids) need an integer split (uint8, uint16 or int32), this one is {}", info_.path,
           shard_format::dtype_name(info_.dtype));
  const size_t sample_bytes = info_.sample_bytes();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t index = indices[i];
    ST_CHECK(index >= 0 && index < size(), "{}: sample index {} is out of range [0, {})", info_.path, index, size());
    std::memcpy(x_out + size_t(i) * sample_bytes, x_.data() + size_t(index) * sample_bytes, sample_bytes);
    y_out[i] = y_[size_t(index)];
  }
}

}  // namespace shardtrain::io
