// libFuzzer target: the checks that decide whether an HDF5 shard is trusted
// (io/shard_reader.cpp, io/shard_set.cpp, the label check), through what the
// memory loader does with a split (InMemoryDataset::load, then a gather).
// Structure-aware: the input chooses what a well-formed HDF5 file holds (the
// root attributes, each present or not, of the right type or not, with any
// value; /x, /y and /crc32 with any type and shape; the stored bytes), and
// the file is written with the HDF5 library. Mutating the file's bytes instead would
// fuzz libhdf5's own parser, which a corrupt file never reaches while the
// shards are checked against manifest.json (data.verify_checksums, the
// default; docs/reliability.md says what libhdf5 does without).
#include "io/dataset.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_handle.h"
#include "io/shard_format.h"
#include "tests/fuzz/fuzz_util.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace shardtrain;
namespace h5 = io::h5;

namespace {

// Every choice reads a value from the input whose zero is the usual (valid)
// one, so that an input of zero bytes decodes to a valid shard.

// An attribute as the input decides: the usual value, absent, or an integer,
// a float or a string of any value.
void attribute(FuzzedDataProvider& in, hid_t object, const char* name, int64_t usual_int, const char* usual_str) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 6: return;  // missing
    case 7: h5::write_int_attribute(object, name, in.ConsumeIntegral<int64_t>()); return;
    case 8: h5::write_float_attribute(object, name, in.ConsumeFloatingPoint<float>()); return;
    case 9: h5::write_string_attribute(object, name, in.ConsumeRandomLengthString(64)); return;
    default:
      if (usual_str != nullptr)
        h5::write_string_attribute(object, name, usual_str);
      else
        h5::write_int_attribute(object, name, usual_int);
  }
}

hid_t pick_type(FuzzedDataProvider& in, hid_t usual) {
  const hid_t others[] = {H5T_STD_U8LE,   H5T_STD_I32LE, H5T_STD_I64LE, H5T_IEEE_F32LE,
                          H5T_IEEE_F64LE, H5T_STD_I8LE,  H5T_STD_U32BE};
  const int pick = in.ConsumeIntegralInRange<int>(0, 15);
  return pick < 9 ? usual : others[pick - 9];
}

// A dataset of the usual or another type and shape (rank 0 to 4, extents 0
// to 9), filled from the input's front bytes.
void dataset(FuzzedDataProvider& in, hid_t file, const char* name, hid_t usual_type, std::vector<hsize_t> dims) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15) return;  // missing
  const hid_t type = pick_type(in, usual_type);
  if (in.ConsumeBool()) {
    dims.resize(in.ConsumeIntegralInRange<size_t>(0, 4));
    for (hsize_t& d : dims) d = in.ConsumeIntegralInRange<hsize_t>(0, 9);
  }
  h5::Dataspace space(h5::check(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr), "dataspace"));
  h5::Dataset ds(h5::check(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name));
  hsize_t n = 1;
  for (const hsize_t d : dims) n *= d;
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(size_t(n) * H5Tget_size(type));
  bytes.resize(size_t(n) * H5Tget_size(type));
  if (n > 0) h5::check_status(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), name);
}

void write_shard_from(FuzzedDataProvider& in, const fs::path& path) {
  namespace sf = io::shard_format;
  h5::File file = h5::create_file(path.string());
  const hid_t root = file.get();
  attribute(in, root, sf::kAttrFormat, 0, sf::kFormat);
  const int64_t version = in.ConsumeIntegralInRange<int64_t>(1, 3) % 3;
  attribute(in, root, sf::kAttrVersion, version, nullptr);
  attribute(in, root, sf::kAttrSplit, 0, "train");
  const int64_t classes = 3 - in.ConsumeIntegralInRange<int64_t>(0, 4);
  attribute(in, root, sf::kAttrNumClasses, classes, nullptr);
  const int64_t index = in.ConsumeIntegralInRange<int64_t>(0, 1);
  attribute(in, root, sf::kAttrShardIndex, index, nullptr);
  const int64_t shards = in.ConsumeIntegralInRange<int64_t>(1, 3) % 3;
  attribute(in, root, sf::kAttrNumShards, shards, nullptr);
  const hsize_t samples = 6 - in.ConsumeIntegralInRange<hsize_t>(0, 6);
  const hid_t x_type = in.ConsumeBool() ? H5T_IEEE_F32LE : H5T_STD_U8LE;
  dataset(in, root, sf::kX, x_type, {samples, 2, 3});
  dataset(in, root, sf::kY, H5T_STD_I32LE, {samples});
  if (in.ConsumeBool() && h5::has_object(root, sf::kX)) {
    h5::Dataset x(h5::check(H5Dopen2(root, sf::kX, H5P_DEFAULT), "x"));
    attribute(in, x.get(), sf::kAttrMean, 0, nullptr);
    if (in.ConsumeBool()) h5::write_float_attribute(x.get(), sf::kAttrStd, in.ConsumeFloatingPoint<float>());
  }
  // Version 2's per-sample checksums, with values from the input (so the
  // check that refuses samples that disagree with them is reached too).
  dataset(in, root, sf::kChecksums, H5T_STD_U32LE, {samples});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  h5::silence_errors();
  const std::string seeds = fuzz::seed_dir();
  if (seeds.empty()) return 0;
  // Inputs that decode to valid shards: zero bytes make every choice the
  // usual one (6 samples of 2x3 uint8, label 0); the second also holds
  // varied sample bytes and labels 0, 1, 2, 0, 1, 2 at its front.
  std::vector<uint8_t> seed(256, 0);
  fuzz::write_file(fs::path(seeds) / "zeros", seed.data(), seed.size());
  for (size_t i = 0; i < 36; ++i) seed[i] = uint8_t(i * 7);
  for (size_t i = 0; i < 6; ++i) seed[36 + 4 * i] = uint8_t(i % 3);
  fuzz::write_file(fs::path(seeds) / "labels", seed.data(), seed.size());
  FuzzedDataProvider in(seed.data(), seed.size());
  const fs::path path = fuzz::scratch_dir() / "part-00000.h5";
  write_shard_from(in, path);
  (void)io::InMemoryDataset::load(path.string(), 0, false);  // a seed that is refused fails here
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = fuzz::scratch_dir() / "part-00000.h5";
  std::filesystem::remove(path);
  FuzzedDataProvider in(data, size);
  try {
    write_shard_from(in, path);
  } catch (const Error&) {
    return 0;  // HDF5 refused to write what the input chose: nothing to read
  }
  fuzz::refusing_errors([&] {
    const io::InMemoryDataset d = io::InMemoryDataset::load(path.string(), 0, true);
    if (d.size() == 0) return;
    std::vector<float> x(size_t(d.info().sample_numel()));
    int32_t y = 0;
    const int64_t last = d.size() - 1;
    d.gather(&last, 1, x.data(), &y);
  });
  return 0;
}
