#include "io/shard_reader.h"

#include "io/hdf5_attributes.h"
#include "runtime/core/error.h"

#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>

namespace shardtrain::io {

namespace {

using namespace shard_format;

h5::Dataset open_dataset(hid_t file, const char* name) {
  ST_CHECK(h5::has_object(file, name), "dataset {} is missing", name);
  return h5::Dataset(h5::check(H5Dopen2(file, name, H5P_DEFAULT), fmt::format("cannot open dataset {}", name)));
}

std::vector<hsize_t> extent(const h5::Dataset& dataset, const char* name) {
  h5::Dataspace space(h5::check(H5Dget_space(dataset.get()), fmt::format("cannot read the shape of {}", name)));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  h5::check_status(rank, fmt::format("cannot read the shape of {}", name));
  std::vector<hsize_t> dims(size_t(rank), 0);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// The dtype of /x from its HDF5 type: any byte order, the sizes and signs
// of the four dtypes shardtrain reads.
std::optional<SampleDType> sample_dtype(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT) return size == 4 ? std::optional(SampleDType::f32) : std::nullopt;
  if (cls != H5T_INTEGER) return std::nullopt;
  const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
  if (size == 1 && !is_signed) return SampleDType::u8;
  if (size == 2 && !is_signed) return SampleDType::u16;
  if (size == 4 && is_signed) return SampleDType::i32;
  return std::nullopt;
}

}  // namespace

namespace shard_format {

hid_t stored_type(SampleDType dtype) {
  switch (dtype) {
    case SampleDType::u8: return H5T_STD_U8LE;
    case SampleDType::u16: return H5T_STD_U16LE;
    case SampleDType::i32: return H5T_STD_I32LE;
    case SampleDType::f32: return H5T_IEEE_F32LE;
  }
  return H5T_IEEE_F32LE;
}

hid_t native_type(SampleDType dtype) {
  switch (dtype) {
    case SampleDType::u8: return H5T_NATIVE_UINT8;
    case SampleDType::u16: return H5T_NATIVE_UINT16;
    case SampleDType::i32: return H5T_NATIVE_INT32;
    case SampleDType::f32: return H5T_NATIVE_FLOAT;
  }
  return H5T_NATIVE_FLOAT;
}

}  // namespace shard_format

ShardReader::ShardReader(std::string path, hid_t fapl) : path_(std::move(path)) {
  file_ = h5::open_file(path_, fapl);  // its errors already name the file
  with_context(path_, [&] {
    read_root_attributes();
    open_x();
    open_y();
    if (header_.version >= 2) open_checksums();
  });
}

void ShardReader::read_root_attributes() {
  const hid_t root = file_.get();
  ST_CHECK(h5::has_attribute(root, kAttrFormat),
           "attribute '{}' is missing: not a shardtrain data file (docs/formats.md)", kAttrFormat);
  const std::string format = h5::read_string_attribute(root, kAttrFormat);
  ST_CHECK(format == kFormat, "attribute '{}' is '{}', expected '{}'", kAttrFormat, format, kFormat);
  const int64_t version = h5::read_int_attribute(root, kAttrVersion);
  ST_CHECK(version >= kOldestVersion && version <= kVersion,
           "{} {} is not supported (this shardtrain reads versions {} to {})", kAttrVersion, version, kOldestVersion,
           kVersion);
  header_.version = version;

  header_.split = h5::read_string_attribute(root, kAttrSplit);
  ST_CHECK(!header_.split.empty(), "attribute '{}' is empty", kAttrSplit);
  const int64_t classes = h5::read_int_attribute(root, kAttrNumClasses);
  ST_CHECK(classes > 0 && classes <= std::numeric_limits<int32_t>::max(),
           "attribute '{}' is {}, it must be a positive int32", kAttrNumClasses, classes);
  const int64_t shards = h5::read_int_attribute(root, kAttrNumShards);
  ST_CHECK(shards >= 1 && shards <= 99999, "attribute '{}' is {}, it must be in [1, 99999]", kAttrNumShards, shards);
  const int64_t index = h5::read_int_attribute(root, kAttrShardIndex);
  ST_CHECK(index >= 0 && index < shards, "attribute '{}' is {}, it must be in [0, {}) ({} = {})", kAttrShardIndex,
           index, shards, kAttrNumShards, shards);
  header_.num_classes = int32_t(classes);
  header_.num_shards = int32_t(shards);
  header_.shard_index = int32_t(index);
}

void ShardReader::open_x() {
  x_ = open_dataset(file_.get(), kX);
  with_context(kX, [&] {
    h5::Type type(h5::check(H5Dget_type(x_.get()), "cannot read the dtype"));
    const std::optional<SampleDType> dtype = sample_dtype(type.get());
    ST_CHECK(dtype.has_value(), "dtype {} is not supported (uint8, uint16, int32 or float32)",
             h5::type_name(type.get()));
    header_.dtype = *dtype;

    const std::vector<hsize_t> dims = extent(x_, kX);
    ST_CHECK(dims.size() >= 2 && dims.size() <= size_t(Shape::kMaxDims) + 1,
             "has {} dimensions, expected [n, d1, ..., dk] with 1 <= k <= {}", dims.size(), Shape::kMaxDims);
    header_.num_samples = int64_t(dims[0]);
    header_.sample_shape = Shape();
    for (size_t i = 1; i < dims.size(); ++i) {
      ST_CHECK(dims[i] > 0, "sample dimension {} is 0", i);
      header_.sample_shape.push_back(int64_t(dims[i]));
    }

    // Optional; absent means the identity on x (or x/255 for uint8).
    const hid_t x = x_.get();
    if (h5::has_attribute(x, kAttrMean)) header_.normalize_mean = float(h5::read_float_attribute(x, kAttrMean));
    if (h5::has_attribute(x, kAttrStd)) header_.normalize_std = float(h5::read_float_attribute(x, kAttrStd));
    ST_CHECK(std::isfinite(header_.normalize_mean), "attribute '{}' is {}, it must be finite", kAttrMean,
             header_.normalize_mean);
    ST_CHECK(std::isfinite(header_.normalize_std) && header_.normalize_std > 0,
             "attribute '{}' is {}, it must be finite and > 0", kAttrStd, header_.normalize_std);
  });
}

void ShardReader::open_y() {
  y_ = open_dataset(file_.get(), kY);
  with_context(kY, [&] {
    h5::Type type(h5::check(H5Dget_type(y_.get()), "cannot read the dtype"));
    ST_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, "dtype {} is not supported (an integer type)",
             h5::type_name(type.get()));
    const std::vector<hsize_t> dims = extent(y_, kY);
    ST_CHECK(dims.size() == 1, "has {} dimensions, expected 1 ([n])", dims.size());
    ST_CHECK(int64_t(dims[0]) == header_.num_samples, "has {} labels but {} has {} samples", dims[0], kX,
             header_.num_samples);
  });
}

void ShardReader::open_checksums() {
  crc_ = open_dataset(file_.get(), kChecksums);
  with_context(kChecksums, [&] {
    h5::Type type(h5::check(H5Dget_type(crc_.get()), "cannot read the dtype"));
    ST_CHECK(H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_size(type.get()) == 4 &&
                 H5Tget_sign(type.get()) == H5T_SGN_NONE,
             "dtype {} is not supported (uint32)", h5::type_name(type.get()));
    const std::vector<hsize_t> dims = extent(crc_, kChecksums);
    ST_CHECK(dims.size() == 1 && int64_t(dims[0]) == header_.num_samples,
             "has shape [{}], expected [{}] (one checksum per sample of {})", fmt::join(dims, ", "),
             header_.num_samples, kX);
  });
}

void ShardReader::read_x(int64_t first, int64_t count, void* out) const {
  ST_ASSERT(first >= 0 && count >= 0 && first + count <= header_.num_samples);
  if (count == 0) return;
  with_context(path_ + ": " + kX, [&] {
    const int rank = header_.sample_shape.ndim() + 1;
    std::array<hsize_t, Shape::kMaxDims + 1> start{}, counts{};
    start[0] = hsize_t(first);
    counts[0] = hsize_t(count);
    for (int i = 1; i < rank; ++i) counts[size_t(i)] = hsize_t(header_.sample_shape[i - 1]);

    h5::Dataspace file_space(h5::check(H5Dget_space(x_.get()), "cannot read the shape"));
    h5::check_status(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr),
        "cannot select samples");
    h5::Dataspace mem_space(h5::check(H5Screate_simple(rank, counts.data(), nullptr), "cannot create dataspace"));
    h5::check_status(H5Dread(x_.get(), native_type(header_.dtype), mem_space.get(), file_space.get(), H5P_DEFAULT, out),
                     fmt::format("cannot read samples [{}, {})", first, first + count));
  });
}

std::vector<int32_t> ShardReader::read_labels() const {
  std::vector<int32_t> labels(size_t(header_.num_samples));
  if (labels.empty()) return labels;
  with_context(path_ + ": " + kY, [&] {
    h5::check_status(H5Dread(y_.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()),
                     "cannot read labels");
  });
  for (size_t i = 0; i < labels.size(); ++i) {
    ST_CHECK(labels[i] >= 0 && labels[i] < header_.num_classes,
             "{}: label {} of sample {} (/y[{}]) is out of range [0, {}) (num_classes {})", path_, labels[i], i, i,
             header_.num_classes, header_.num_classes);
  }
  return labels;
}

std::vector<uint32_t> ShardReader::read_checksums() const {
  std::vector<uint32_t> crcs;
  if (header_.version < 2 || header_.num_samples == 0) return crcs;
  crcs.resize(size_t(header_.num_samples));
  with_context(path_ + ": " + kChecksums, [&] {
    h5::check_status(H5Dread(crc_.get(), H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, crcs.data()),
                     "cannot read the checksums");
  });
  return crcs;
}

}  // namespace shardtrain::io
