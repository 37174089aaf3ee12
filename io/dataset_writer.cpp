#include "io/dataset_writer.h"

#include "io/durable_file.h"
#include "io/hdf5_attributes.h"
#include "io/shard_reader.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

namespace shardtrain::io {

namespace {

using namespace shard_format;

void check_header(const ShardHeader& h) {
  ST_CHECK(!h.split.empty(), "split name is empty");
  ST_CHECK(h.num_classes > 0, "num_classes is {}, it must be > 0", h.num_classes);
  ST_CHECK(h.num_shards >= 1 && h.shard_index >= 0 && h.shard_index < h.num_shards,
           "shard_index {} of num_shards {} is not a valid shard", h.shard_index, h.num_shards);
  ST_CHECK(h.num_samples >= 1, "a shard needs at least one sample, got {}", h.num_samples);
  ST_CHECK(h.sample_shape.ndim() >= 1 && h.sample_shape.numel() > 0, "sample shape {} is empty", h.sample_shape.str());
  ST_CHECK(std::isfinite(h.normalize_mean) && std::isfinite(h.normalize_std) && h.normalize_std > 0,
           "normalization mean {} std {} is invalid (finite, std > 0)", h.normalize_mean, h.normalize_std);
}

// The file dataspace of `dataset` with rows [first, first + count) selected.
h5::Dataspace select_rows(const h5::Dataset& dataset, int64_t first, int64_t count, int rank) {
  h5::Dataspace space(h5::check(H5Dget_space(dataset.get()), "cannot get dataspace"));
  std::vector<hsize_t> start(size_t(rank), 0), counts(size_t(rank), 0);
  H5Sget_simple_extent_dims(space.get(), counts.data(), nullptr);
  start[0] = hsize_t(first);
  counts[0] = hsize_t(count);
  h5::check_status(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr),
                   "cannot select rows");
  return space;
}

}  // namespace

ShardWriter::ShardWriter(std::string path, const ShardHeader& header)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), header_(header) {
  with_context(path_, [&] { check_header(header_); });
  file_ = h5::create_file(tmp_path_);
  try {
    create_contents();
  } catch (...) {
    discard();  // the destructor does not run for a throwing constructor
    throw;
  }
}

void ShardWriter::create_contents() {
  with_context(path_, [&] {
    const hid_t root = file_.get();
    h5::write_string_attribute(root, kAttrFormat, kFormat);
    h5::write_int_attribute(root, kAttrVersion, kVersion);
    h5::write_string_attribute(root, kAttrSplit, header_.split);
    h5::write_int_attribute(root, kAttrNumClasses, header_.num_classes);
    h5::write_int_attribute(root, kAttrShardIndex, header_.shard_index);
    h5::write_int_attribute(root, kAttrNumShards, header_.num_shards);

    // /x [n, d1..dk], chunked along n at about kChunkBytes, no filter: later
    // readers compute a sample's file offset from the chunk index alone.
    const int rank = header_.sample_shape.ndim() + 1;
    std::vector<hsize_t> dims{hsize_t(header_.num_samples)};
    for (int i = 0; i < header_.sample_shape.ndim(); ++i) dims.push_back(hsize_t(header_.sample_shape[i]));
    const auto bytes = int64_t(sample_bytes(header_));
    ST_CHECK(bytes < (int64_t(1) << 32), "a sample of {} bytes exceeds HDF5's 4 GiB chunk limit", bytes);
    // The rows are spread evenly over the chunks the target size calls for:
    // HDF5 stores a partial last chunk at full size, so 15000 samples get 12
    // chunks of 1250 rather than 11 of 1337 and a mostly empty twelfth.
    const int64_t n = header_.num_samples;
    const int64_t target_rows = std::max<int64_t>(1, kChunkBytes / bytes);
    const int64_t num_chunks = (n + target_rows - 1) / target_rows;
    std::vector<hsize_t> chunk = dims;
    chunk_rows_ = (n + num_chunks - 1) / num_chunks;
    chunk[0] = hsize_t(chunk_rows_);

    h5::PropList dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "cannot create property list"));
    h5::check_status(H5Pset_chunk(dcpl.get(), rank, chunk.data()), "cannot set chunking of /x");
    // Every chunk is written in full, so filling them first would be wasted I/O.
    h5::check_status(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "cannot set fill time of /x");
    h5::Dataspace x_space(h5::check(H5Screate_simple(rank, dims.data(), nullptr), "cannot create dataspace"));
    const hid_t x_type = stored_type(header_.dtype);
    x_ = h5::Dataset(h5::check(H5Dcreate2(root, kX, x_type, x_space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                               "cannot create /x"));
    h5::write_float_attribute(x_.get(), kAttrMean, header_.normalize_mean);
    h5::write_float_attribute(x_.get(), kAttrStd, header_.normalize_std);

    // /y [n] int32 and /crc32 [n] uint32, contiguous: small next to /x and
    // read whole.
    h5::Dataspace n_space(h5::check(H5Screate_simple(1, dims.data(), nullptr), "cannot create dataspace"));
    y_ = h5::Dataset(h5::check(
        H5Dcreate2(root, kY, H5T_STD_I32LE, n_space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "cannot create /y"));
    crc_ = h5::Dataset(
        h5::check(H5Dcreate2(root, kChecksums, H5T_STD_U32LE, n_space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  fmt::format("cannot create {}", kChecksums)));
  });
}

ShardWriter::~ShardWriter() {
  if (!finished_) discard();
}

void ShardWriter::discard() {
  x_ = {};
  y_ = {};
  crc_ = {};
  file_ = {};
  std::error_code ec;
  std::filesystem::remove(tmp_path_, ec);  // best effort: a reader ignores *.tmp anyway
}

void ShardWriter::append(const void* x, const int32_t* y, int64_t count) {
  with_context(path_, [&] {
    ST_CHECK(!finished_, "append after finish");
    ST_CHECK(count >= 0 && written_ + count <= header_.num_samples,
             "appending {} samples to the {} written exceeds the declared {}", count, written_, header_.num_samples);
    if (count == 0) return;
    for (int64_t i = 0; i < count; ++i) {
      ST_CHECK(y[i] >= 0 && y[i] < header_.num_classes, "label {} of sample {} is out of range [0, {})", y[i],
               written_ + i, header_.num_classes);
    }
    // The memory dataspace has the selection's shape, [count, d1..dk]: with
    // a flat one HDF5 maps chunks element by element, about 10x slower.
    const int rank = header_.sample_shape.ndim() + 1;
    h5::Dataspace x_file = select_rows(x_, written_, count, rank);
    std::vector<hsize_t> x_dims{hsize_t(count)};
    for (int i = 0; i < header_.sample_shape.ndim(); ++i) x_dims.push_back(hsize_t(header_.sample_shape[i]));
    h5::Dataspace x_mem(h5::check(H5Screate_simple(rank, x_dims.data(), nullptr), "cannot create dataspace"));
    const hid_t x_type = native_type(header_.dtype);
    h5::check_status(H5Dwrite(x_.get(), x_type, x_mem.get(), x_file.get(), H5P_DEFAULT, x), "cannot write /x");

    h5::Dataspace y_file = select_rows(y_, written_, count, 1);
    const hsize_t y_elems = hsize_t(count);
    h5::Dataspace y_mem(h5::check(H5Screate_simple(1, &y_elems, nullptr), "cannot create dataspace"));
    h5::check_status(H5Dwrite(y_.get(), H5T_NATIVE_INT32, y_mem.get(), y_file.get(), H5P_DEFAULT, y),
                     "cannot write /y");

    const size_t bytes = sample_bytes(header_);
    std::vector<uint32_t> crcs(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      crcs[size_t(i)] = sample_crc32(static_cast<const char*>(x) + size_t(i) * bytes, bytes, y[i]);
    h5::Dataspace crc_file = select_rows(crc_, written_, count, 1);
    h5::check_status(H5Dwrite(crc_.get(), H5T_NATIVE_UINT32, y_mem.get(), crc_file.get(), H5P_DEFAULT, crcs.data()),
                     fmt::format("cannot write {}", kChecksums));
    written_ += count;
  });
}

void ShardWriter::finish() {
  with_context(path_, [&] {
    ST_CHECK(!finished_, "finish called twice");
    ST_CHECK(written_ == header_.num_samples, "only {} of the declared {} samples were written", written_,
             header_.num_samples);
    x_.close("cannot close /x");
    y_.close("cannot close /y");
    crc_.close(fmt::format("cannot close {}", kChecksums));
    file_.close("cannot close the file");
    publish(tmp_path_, path_);  // fsync, rename, fsync the directory
    finished_ = true;
  });
}

void write_shard(const std::string& path, const ShardHeader& header, const void* x, const int32_t* y) {
  ShardWriter writer(path, header);
  writer.append(x, y, header.num_samples);
  writer.finish();
}

void remove_stale_shards(const std::string& dir, int shards) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    const bool tmp = name.ends_with(".tmp");
    if (tmp) name.resize(name.size() - 4);
    int index = 0;
    if (shard_format::parse_shard_file_name(name, &index) && (tmp || index >= shards)) {
      std::error_code remove_ec;
      std::filesystem::remove(it->path(), remove_ec);
      ST_CHECK(!remove_ec, "{}: cannot remove stale shard file: {}", it->path().string(), remove_ec.message());
    }
  }
  ST_CHECK(!ec, "{}: cannot list directory: {}", dir, ec.message());
}

}  // namespace shardtrain::io
