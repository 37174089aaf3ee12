// InMemoryDataset::load against files of every shape a user might produce:
// valid variants load (fixed-length strings, int64 labels, compressed /x,
// float32 samples), and each schema violation is an Error naming the file and
// the object at fault. Files are built with the HDF5 C API directly so that
// they can break the rules ShardWriter enforces.
#include "io/dataset.h"
#include "io/dataset_writer.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_handle.h"
#include "io/manifest.h"
#include "io_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

// A shard described field by field; std::nullopt leaves an attribute out.
struct RawShard {
  std::optional<std::string> format = "shardtrain.classification";
  std::optional<int64_t> version = 1;
  std::optional<std::string> split = "train";
  std::optional<int64_t> num_classes = 4;
  std::optional<int64_t> shard_index = 0;
  std::optional<int64_t> num_shards = 1;
  bool fixed_length_strings = false;  // as numpy bytes_ rather than str

  bool write_x = true;
  std::vector<hsize_t> x_dims = {6, 2, 3};
  hid_t x_type = H5T_STD_U8LE;
  bool deflate = false;
  std::optional<double> mean, std;
  int value_offset = 0;  // x[k] = (k + value_offset) % 200 * value_scale
  int value_scale = 1;   // > 1: values beyond a byte, for uint16 and int32 /x

  bool write_y = true;
  std::vector<int64_t> labels = {0, 1, 2, 3, 0, 1};
  hid_t y_type = H5T_STD_I64LE;
};

int x_value(const RawShard& s, size_t k) { return int((k + size_t(s.value_offset)) % 200) * s.value_scale; }

void write_string(hid_t obj, const char* name, const std::string& value, bool fixed) {
  if (!fixed) return h5::write_string_attribute(obj, name, value);
  h5::Type type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), value.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  h5::Dataspace space(H5Screate(H5S_SCALAR));
  h5::Attribute attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Awrite(attr.get(), type.get(), value.data()), 0);
}

void write_raw(const std::string& path, const RawShard& s) {
  h5::File file = h5::create_file(path);
  const hid_t root = file.get();
  if (s.format) write_string(root, "format", *s.format, s.fixed_length_strings);
  if (s.version) h5::write_int_attribute(root, "format_version", *s.version);
  if (s.split) write_string(root, "split", *s.split, s.fixed_length_strings);
  if (s.num_classes) h5::write_int_attribute(root, "num_classes", *s.num_classes);
  if (s.shard_index) h5::write_int_attribute(root, "shard_index", *s.shard_index);
  if (s.num_shards) h5::write_int_attribute(root, "num_shards", *s.num_shards);

  if (s.write_x) {
    size_t numel = 1;
    for (hsize_t d : s.x_dims) numel *= d;
    std::vector<int> values(numel);
    for (size_t k = 0; k < numel; ++k) values[k] = x_value(s, k);
    h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
    if (s.deflate) {
      std::vector<hsize_t> chunk = s.x_dims;
      chunk[0] = 2;
      H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data());
      H5Pset_deflate(dcpl.get(), 6);
    }
    h5::Dataspace space(H5Screate_simple(int(s.x_dims.size()), s.x_dims.data(), nullptr));
    h5::Dataset x(H5Dcreate2(root, "x", s.x_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(x.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    if (s.mean) h5::write_float_attribute(x.get(), "normalize_mean", float(*s.mean));
    if (s.std) h5::write_float_attribute(x.get(), "normalize_std", float(*s.std));
  }
  if (s.write_y) {
    const hsize_t n = s.labels.size();
    h5::Dataspace space(H5Screate_simple(1, &n, nullptr));
    h5::Dataset y(H5Dcreate2(root, "y", s.y_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(y.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.labels.data()), 0);
  }
  file.close("closing test file");
}

// Loads `s` written as dir/part-00000.h5 and expects an Error naming the file
// and every one of `parts`.
void expect_load_error(const RawShard& s, std::initializer_list<std::string> parts) {
  TempDir dir;
  const std::string file = dir / "part-00000.h5";
  write_raw(file, s);
  std::vector<std::string> all{file};
  all.insert(all.end(), parts);
  const std::string message = expect_error([&] { InMemoryDataset::load(dir.path()); }, {});
  for (const std::string& part : all)
    EXPECT_NE(message.find(part), std::string::npos) << "lacks '" << part << "': " << message;
}

std::vector<float> gather_all(const InMemoryDataset& ds, std::vector<int32_t>* labels) {
  std::vector<int64_t> idx(size_t(ds.size()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  std::vector<float> x(idx.size() * size_t(ds.info().sample_numel()));
  labels->resize(idx.size());
  ds.gather(idx.data(), ds.size(), x.data(), labels->data());
  return x;
}

// ---- files that must load ------------------------------------------------

TEST(DatasetLoad, UserVariantsLoad) {
  // Fixed-length strings, int64 labels, a deflate-compressed /x, no
  // normalization attributes (so x/255).
  RawShard s;
  s.fixed_length_strings = true;
  s.deflate = true;
  TempDir dir;
  write_raw(dir / "part-00000.h5", s);
  InMemoryDataset ds = InMemoryDataset::load(dir.path());
  EXPECT_EQ(ds.info().split, "train");
  EXPECT_EQ(ds.info().num_classes, 4);
  EXPECT_EQ(ds.info().sample_shape, (Shape{2, 3}));
  EXPECT_EQ(ds.info().dtype, SampleDType::u8);
  EXPECT_EQ(ds.info().normalize_mean, 0.0f);
  EXPECT_EQ(ds.info().normalize_std, 1.0f);
  std::vector<int32_t> y;
  std::vector<float> x = gather_all(ds, &y);
  EXPECT_EQ(y, (std::vector<int32_t>{0, 1, 2, 3, 0, 1}));
  for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], x_value(s, k) / 255.0, 1e-6) << k;
}

TEST(DatasetLoad, Float32WithNormalization) {
  RawShard s;
  s.x_type = H5T_IEEE_F32BE;  // any byte order
  s.y_type = H5T_STD_U8LE;
  s.mean = 10.0;
  s.std = 4.0;
  TempDir dir;
  write_raw(dir / "one.h5", s);
  InMemoryDataset ds = InMemoryDataset::load(dir / "one.h5");  // a single file
  EXPECT_EQ(ds.info().dtype, SampleDType::f32);
  EXPECT_EQ(ds.info().shard_files, std::vector<std::string>{dir / "one.h5"});
  std::vector<int32_t> y;
  std::vector<float> x = gather_all(ds, &y);
  for (size_t k = 0; k < x.size(); ++k) EXPECT_FLOAT_EQ(x[k], (float(x_value(s, k)) - 10.0f) / 4.0f) << k;
}

TEST(DatasetLoad, TokenDtypesAreReadAsStored) {
  // uint16 and int32 /x in either byte order: gather_bytes hands over the
  // values in this machine's byte order (token ids for a language model),
  // gather normalizes the values as stored, without uint8's / 255.
  for (hid_t type : {H5T_STD_U16LE, H5T_STD_U16BE, H5T_STD_I32LE, H5T_STD_I32BE}) {
    RawShard s;
    s.x_type = type;
    s.value_scale = 300;  // up to 59700
    s.mean = 100.0;
    s.std = 2.0;
    TempDir dir;
    write_raw(dir / "part-00000.h5", s);
    const InMemoryDataset ds = InMemoryDataset::load(dir.path());
    const bool u16 = H5Tget_size(type) == 2;
    EXPECT_EQ(ds.info().dtype, u16 ? SampleDType::u16 : SampleDType::i32);
    std::vector<int32_t> y;
    const std::vector<float> x = gather_all(ds, &y);
    for (size_t k = 0; k < x.size(); ++k) EXPECT_FLOAT_EQ(x[k], (float(x_value(s, k)) - 100.0f) / 2.0f) << k;

    std::vector<int64_t> idx{5, 0};
    std::vector<uint8_t> raw(2 * 6 * (u16 ? 2 : 4));
    std::vector<int32_t> labels(2);
    ds.gather_bytes(idx.data(), 2, raw.data(), labels.data());
    EXPECT_EQ(labels, (std::vector<int32_t>{1, 0}));
    for (size_t j = 0; j < 12; ++j) {
      const size_t k = (j < 6 ? 5 * 6 : 0) + j % 6;  // sample 5, then sample 0
      int32_t v = 0;
      if (u16) {
        uint16_t w;
        std::memcpy(&w, raw.data() + 2 * j, 2);
        v = w;
      } else {
        std::memcpy(&v, raw.data() + 4 * j, 4);
      }
      EXPECT_EQ(v, x_value(s, k)) << j;
    }
  }
  // Float samples have no raw ids to hand over.
  RawShard s;
  s.x_type = H5T_IEEE_F32LE;
  TempDir dir;
  write_raw(dir / "part-00000.h5", s);
  const InMemoryDataset ds = InMemoryDataset::load(dir.path());
  std::vector<int64_t> idx{0};
  std::vector<uint8_t> raw(24);
  std::vector<int32_t> labels(1);
  expect_error([&] { ds.gather_bytes(idx.data(), 1, raw.data(), labels.data()); },
               {"need an integer split (uint8, uint16 or int32)", "float32"});
}

TEST(DatasetLoad, MultiShardOrderAndLimit) {
  TempDir dir;
  for (int i = 0; i < 3; ++i) {
    RawShard s;
    s.shard_index = i;
    s.num_shards = 3;
    s.x_dims = {hsize_t(2 + i), 4};
    s.labels.assign(size_t(2 + i), i);
    s.value_offset = 100 * i;
    write_raw(dir / shard_format::shard_file_name(i), s);
  }
  testing::write_bytes(dir / "README.txt", {1});            // ignored
  testing::write_bytes(dir / "part-00003.h5.tmp", {1, 2});  // ignored: an interrupted write
  InMemoryDataset ds = InMemoryDataset::load(dir.path());
  EXPECT_EQ(ds.size(), 2 + 3 + 4);
  std::vector<int32_t> y;
  gather_all(ds, &y);
  EXPECT_EQ(y, (std::vector<int32_t>{0, 0, 1, 1, 1, 2, 2, 2, 2}));

  // Sample 4 is the third of shard 1: values (8 + k + 100) % 200.
  InMemoryDataset limited = InMemoryDataset::load(dir.path(), 5);
  EXPECT_EQ(limited.size(), 5);
  const int64_t index = 4;
  std::vector<float> x(4);
  int32_t label = -1;
  limited.gather(&index, 1, x.data(), &label);
  EXPECT_EQ(label, 1);
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(x[size_t(k)], ((8 + k + 100) % 200) / 255.0, 1e-6);
  expect_error([&] { InMemoryDataset::load(dir.path(), -1); }, {dir.path(), "limit -1"});
}

TEST(DatasetLoad, EmptyShardsAreAllowedButNotAnEmptySplit) {
  TempDir dir;
  RawShard a = RawShard(), empty = RawShard();
  a.num_shards = empty.num_shards = 2;
  empty.shard_index = 1;
  empty.x_dims = {0, 2, 3};
  empty.labels = {};
  write_raw(dir / "part-00000.h5", a);
  write_raw(dir / "part-00001.h5", empty);
  EXPECT_EQ(InMemoryDataset::load(dir.path()).size(), 6);

  TempDir only_empty;
  empty.shard_index = 0;
  empty.num_shards = 1;
  write_raw(only_empty / "part-00000.h5", empty);
  expect_error([&] { InMemoryDataset::load(only_empty.path()); }, {only_empty.path(), "the split has no samples"});
}

// ---- schema violations -----------------------------------------------------

TEST(DatasetSchema, MissingY) {
  RawShard s;
  s.write_y = false;
  expect_load_error(s, {"dataset /y is missing"});
}

TEST(DatasetSchema, MissingX) {
  RawShard s;
  s.write_x = false;
  expect_load_error(s, {"dataset /x is missing"});
}

TEST(DatasetSchema, MissingFormatAttribute) {
  RawShard s;
  s.format.reset();
  expect_load_error(s, {"attribute 'format' is missing", "not a shardtrain data file"});
}

TEST(DatasetSchema, WrongFormatString) {
  RawShard s;
  s.format = "imagenet.records";
  expect_load_error(s, {"'imagenet.records'", "expected 'shardtrain.classification'"});
}

TEST(DatasetSchema, FormatVersion3) {
  RawShard s;
  s.version = 3;
  TempDir dir;
  write_raw(dir / "part-00000.h5", s);
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00000.h5: format_version 3 is not supported (this shardtrain reads versions 1 to 2)"});
}

TEST(DatasetSchema, MissingOrMistypedAttributes) {
  RawShard s;
  s.num_classes.reset();
  expect_load_error(s, {"attribute 'num_classes' is missing"});
  s = RawShard();
  s.shard_index.reset();
  expect_load_error(s, {"attribute 'shard_index' is missing"});
  s = RawShard();
  s.split.reset();
  expect_load_error(s, {"attribute 'split' is missing"});
  s = RawShard();
  s.num_classes = 0;
  expect_load_error(s, {"'num_classes' is 0"});
  s = RawShard();
  s.shard_index = 1;
  expect_load_error(s, {"'shard_index' is 1", "[0, 1)"});
}

TEST(DatasetSchema, MistypedAttribute) {
  TempDir dir;
  RawShard s;
  s.version.reset();
  write_raw(dir / "part-00000.h5", s);
  {
    h5::File f(H5Fopen((dir / "part-00000.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5::write_string_attribute(f.get(), "format_version", "1");
  }
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00000.h5", "'format_version' must be an integer, it is string"});
}

TEST(DatasetSchema, BadNormalization) {
  RawShard s;
  s.std = 0.0;
  expect_load_error(s, {"/x", "'normalize_std' is 0"});
}

TEST(DatasetSchema, LengthMismatch) {
  RawShard s;
  s.labels = {0, 1, 2, 3, 0};
  expect_load_error(s, {"/y", "5 labels", "/x has 6 samples"});
}

TEST(DatasetSchema, UnsupportedDtypes) {
  RawShard s;
  s.x_type = H5T_STD_I16LE;
  expect_load_error(s, {"/x", "dtype int16 is not supported (uint8, uint16, int32 or float32)"});
  s.x_type = H5T_STD_U32LE;  // a sign or a size other than the four dtypes
  expect_load_error(s, {"/x", "dtype uint32 is not supported"});
  s.x_type = H5T_STD_I8LE;
  expect_load_error(s, {"/x", "dtype int8 is not supported"});
  s.x_type = H5T_IEEE_F64LE;
  expect_load_error(s, {"/x", "dtype float64 is not supported"});
  s = RawShard();
  s.y_type = H5T_IEEE_F32LE;
  expect_load_error(s, {"/y", "dtype float32 is not supported"});
}

TEST(DatasetSchema, WrongRanks) {
  RawShard s;
  s.x_dims = {6};
  expect_load_error(s, {"/x", "has 1 dimensions"});
}

TEST(DatasetSchema, LabelOutOfRange) {
  RawShard s;
  s.labels = {0, 1, 7, 3, 0, 1};
  expect_load_error(s, {"label 7 of sample 2", "[0, 4)"});
  s.labels = {0, 1, 2, 3, -1, 1};
  expect_load_error(s, {"label -1 of sample 4"});
}

TEST(DatasetSchema, LabelOutOfRangeBeyondLimit) {
  RawShard s;
  s.labels = {0, 1, 2, 3, 0, 9};
  TempDir dir;
  write_raw(dir / "part-00000.h5", s);
  expect_error([&] { InMemoryDataset::load(dir.path(), 2); }, {"label 9 of sample 5"});
}

// ---- shard sets ------------------------------------------------------------

void write_set(const TempDir& dir, const std::vector<int>& file_numbers, const std::vector<RawShard>& shards) {
  for (size_t i = 0; i < shards.size(); ++i) write_raw(dir / shard_format::shard_file_name(file_numbers[i]), shards[i]);
}

RawShard shard(int index, int count) {
  RawShard s;
  s.shard_index = index;
  s.num_shards = count;
  return s;
}

TEST(DatasetShards, MissingShard) {
  TempDir dir;
  write_set(dir, {0, 2}, {shard(0, 3), shard(2, 3)});
  expect_error([&] { InMemoryDataset::load(dir.path()); }, {dir.path(), "shard 1 of 3 is missing", "2 shard file(s)"});
}

TEST(DatasetShards, DuplicateIndex) {
  TempDir dir;
  write_set(dir, {0, 1}, {shard(0, 2), shard(0, 2)});
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00000.h5", dir / "part-00001.h5", "both have shard_index 0"});
}

TEST(DatasetShards, IndexDisagreesWithNameOrder) {
  TempDir dir;
  write_set(dir, {0, 1}, {shard(1, 2), shard(0, 2)});
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00000.h5", "shard_index 1 but is file 0 in name order"});
}

TEST(DatasetShards, InconsistentShapes) {
  TempDir dir;
  RawShard b = shard(1, 2);
  b.x_dims = {6, 3, 2};
  write_set(dir, {0, 1}, {shard(0, 2), b});
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00001.h5", "sample shape [3, 2] differs from [2, 3] in", dir / "part-00000.h5"});
}

TEST(DatasetShards, InconsistentMetadata) {
  TempDir dir;
  RawShard b = shard(1, 2);
  b.split = "test";
  write_set(dir, {0, 1}, {shard(0, 2), b});
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00001.h5", "split 'test' differs from 'train'"});

  TempDir dir2;
  b = shard(1, 3);
  write_set(dir2, {0, 1}, {shard(0, 2), b});
  expect_error([&] { InMemoryDataset::load(dir2.path()); }, {dir2 / "part-00001.h5", "num_shards 3 differs from 2"});

  TempDir dir3;
  b = shard(1, 2);
  b.x_type = H5T_IEEE_F32LE;
  write_set(dir3, {0, 1}, {shard(0, 2), b});
  expect_error([&] { InMemoryDataset::load(dir3.path()); },
               {dir3 / "part-00001.h5", "dtype float32 differs from uint8"});

  TempDir dir4;
  b = shard(1, 2);
  b.mean = 0.5;
  write_set(dir4, {0, 1}, {shard(0, 2), b});
  expect_error([&] { InMemoryDataset::load(dir4.path()); },
               {dir4 / "part-00001.h5", "normalize_mean 0.5 differs from 0"});
}

TEST(DatasetShards, SingleFileOfALargerSet) {
  TempDir dir;
  write_set(dir, {0, 1}, {shard(0, 2), shard(1, 2)});
  expect_error([&] { InMemoryDataset::load(dir / "part-00001.h5"); },
               {dir / "part-00001.h5", "a single file must be a one-shard split"});
}

// ---- paths -----------------------------------------------------------------

TEST(DatasetPaths, NotAnHdf5File) {
  TempDir dir;
  testing::write_bytes(dir / "part-00000.h5", {'h', 'e', 'l', 'l', 'o', '\n'});
  expect_error([&] { InMemoryDataset::load(dir.path()); },
               {dir / "part-00000.h5", "cannot open as an HDF5 file", "signature not found"});
}

TEST(DatasetPaths, NonexistentPath) {
  TempDir dir;
  expect_error([&] { InMemoryDataset::load(dir / "nope"); }, {dir / "nope", "no such file or directory"});
}

TEST(DatasetPaths, EmptyDirectory) {
  TempDir dir;
  testing::write_bytes(dir / "notes.txt", {1});
  expect_error([&] { InMemoryDataset::load(dir.path()); }, {dir.path(), "no shard files"});
}

TEST(DatasetPaths, MisnamedShard) {
  TempDir dir;
  write_raw(dir / "part-00000.h5", RawShard());
  write_raw(dir / "part-1.h5", shard(1, 2));
  expect_error([&] { InMemoryDataset::load(dir.path()); }, {dir.path(), "'part-1.h5'", "part-NNNNN.h5"});
}

// ---- writer ----------------------------------------------------------------

shard_format::ShardHeader small_header(int64_t n) {
  shard_format::ShardHeader h;
  h.split = "train";
  h.num_classes = 3;
  h.num_samples = n;
  h.sample_shape = Shape{4};
  h.dtype = SampleDType::f32;
  return h;
}

TEST(ShardWriter, AppendsInPiecesAndRenamesAtFinish) {
  TempDir dir;
  const std::string path = dir / "part-00000.h5";
  std::vector<float> x(5 * 4);
  for (size_t k = 0; k < x.size(); ++k) x[k] = float(k) * 0.25f;
  std::vector<int32_t> y{0, 1, 2, 0, 1};
  {
    ShardWriter w(path, small_header(5));
    w.append(x.data(), y.data(), 2);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::exists(path + ".tmp"));
    w.append(x.data() + 8, y.data() + 2, 3);
    w.finish();
  }
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  InMemoryDataset ds = InMemoryDataset::load(dir.path());
  std::vector<int32_t> labels;
  EXPECT_EQ(gather_all(ds, &labels), x);
  EXPECT_EQ(labels, y);
}

TEST(ShardWriter, UnfinishedWriteLeavesNoFile) {
  TempDir dir;
  const std::string path = dir / "part-00000.h5";
  std::vector<float> x(5 * 4, 1.0f);
  std::vector<int32_t> y{0, 1, 2, 0, 3};
  {
    ShardWriter w(path, small_header(5));
    w.append(x.data(), y.data(), 2);
    expect_error([&] { w.append(x.data(), y.data(), 4); }, {path, "exceeds the declared 5"});
    expect_error([&] { w.append(x.data(), y.data() + 2, 3); }, {path, "label 3 of sample 4", "[0, 3)"});
    expect_error([&] { w.finish(); }, {path, "only 2 of the declared 5"});
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
  expect_error([&] { ShardWriter(path, small_header(0)); }, {path, "at least one sample"});
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(ShardWriter, TokenDtypesRoundTripWithTheirChecksums) {
  // uint16 and int32 samples are written little-endian with a CRC-32 of
  // those bytes each, verified as the split loads.
  TempDir dir;
  const std::vector<uint16_t> x16{0, 255, 256, 65535, 1, 2, 40000, 7};
  const std::vector<int32_t> x32{0, 255, 256, 65535, 65536, 1 << 20, 2147483647, 7};
  const std::vector<int32_t> y{1, 2};
  for (const auto& [name, dtype, data] : {std::tuple{"u16", SampleDType::u16, static_cast<const void*>(x16.data())},
                                          std::tuple{"i32", SampleDType::i32, static_cast<const void*>(x32.data())}}) {
    shard_format::ShardHeader h = small_header(2);
    h.dtype = dtype;
    fs::create_directories(dir / name);
    write_shard(dir / (std::string(name) + "/part-00000.h5"), h, data, y.data());
    write_split_manifest(dir / name);
    const InMemoryDataset ds = InMemoryDataset::load(dir / name);
    EXPECT_TRUE(ds.info().samples_verified);
    EXPECT_EQ(read_manifest(dir / name)->dtype, dtype);
    std::vector<int64_t> idx{0, 1};
    const size_t bytes = 8 * shard_format::dtype_size(dtype);
    std::vector<uint8_t> raw(bytes);
    std::vector<int32_t> labels(2);
    ds.gather_bytes(idx.data(), 2, raw.data(), labels.data());
    EXPECT_EQ(std::memcmp(raw.data(), data, bytes), 0) << name;
    EXPECT_EQ(labels, y);
  }
}

// ---- checksums against manifest.json ----------------------------------------

TEST(DatasetChecksums, EveryShardIsCheckedAgainstTheManifest) {
  TempDir dir;
  write_set(dir, {0, 1}, {shard(0, 2), shard(1, 2)});
  EXPECT_FALSE(InMemoryDataset::load(dir.path()).info().checksums_verified);  // no manifest yet: nothing to check
  write_split_manifest(dir.path());
  EXPECT_TRUE(InMemoryDataset::load(dir.path()).info().checksums_verified);
  EXPECT_FALSE(InMemoryDataset::load(dir.path(), 0, /*verify=*/false).info().checksums_verified);

  // One byte of the last shard changed, its size kept: HDF5 might read it
  // without complaint; the checksum does not, also with a limit that reads
  // no sample of that shard.
  const std::string last = dir / "part-00001.h5";
  std::fstream f(last, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-40, std::ios::end);
  const char byte = char(f.get() ^ 0x5a);
  f.seekp(-40, std::ios::end);
  f.put(byte);
  f.close();
  expect_error([&] { InMemoryDataset::load(dir.path()); }, {last, "checksum mismatch", "corrupt file"});
  expect_error([&] { InMemoryDataset::load(dir.path(), 1); }, {last, "checksum mismatch"});
}

}  // namespace
}  // namespace shardtrain::io
