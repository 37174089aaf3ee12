// libFuzzer target: every check load() makes before it reads a tensor
// (checkpoint::read_metadata): the header's attributes, their ranges and the
// identity against this job's, the datasets' presence, the metadata CRC-32,
// the pieces table and the checksum table. Structure-aware: the input
// decides what a well-formed HDF5 file holds (each header value as written
// or changed, the tables' shapes and rows, the datasets present, the
// metadata checksum right or not), and the file is written with the HDF5
// library: mutating its bytes would fuzz libhdf5's own parser, which a
// changed byte never reaches, since load() checks the file's seal first
// (docs/reliability.md).
#include "io/hdf5_attributes.h"
#include "io/hdf5_handle.h"
#include "runtime/checkpoint/header_io.h"
#include "runtime/checkpoint/integrity.h"
#include "tests/fuzz/fuzz_util.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <filesystem>
#include <vector>

namespace fs = std::filesystem;
using namespace shardtrain;
using namespace shardtrain::checkpoint;
namespace h5 = io::h5;

namespace {

constexpr int64_t kFlat = 40;

Identity job_identity() {
  Identity id;
  id.model = "mlp";
  id.model_signature = "fc.weight [8, 4] @0\nfc.bias [8] @32\n";
  id.flat_numel = kFlat;
  id.optimizer = "adamw";
  id.state_names = {"m", "v"};
  id.seed = 3;
  id.global_batch = 16;
  return id;
}

// Every choice reads a value whose zero keeps what a 2-rank writer wrote, so
// that an input of zero bytes decodes to a valid checkpoint.
int64_t maybe(FuzzedDataProvider& in, int64_t written) {
  return in.ConsumeIntegralInRange<int>(0, 7) < 6 ? written : in.ConsumeIntegral<int64_t>();
}
std::string maybe(FuzzedDataProvider& in, const std::string& written) {
  return in.ConsumeIntegralInRange<int>(0, 7) < 6 ? written : in.ConsumeRandomLengthString(64);
}

template <typename T>
void table(FuzzedDataProvider& in, hid_t file, const char* name, hid_t type, std::vector<T> rows, hsize_t cols) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15) return;  // missing
  hsize_t dims[2] = {rows.size() / cols, cols};
  if (in.ConsumeIntegralInRange<int>(0, 7) == 7) {  // another shape and content
    dims[0] = in.ConsumeIntegralInRange<hsize_t>(0, 9);
    dims[1] = in.ConsumeIntegralInRange<hsize_t>(0, 4);
    rows.assign(dims[0] * dims[1], T{});
    for (T& v : rows) v = in.ConsumeIntegral<T>();
  } else if (!rows.empty() && in.ConsumeIntegralInRange<int>(0, 3) == 3) {  // one value changed
    rows[in.ConsumeIntegralInRange<size_t>(0, rows.size() - 1)] = in.ConsumeIntegral<T>();
  }
  h5::Dataspace space(h5::check(H5Screate_simple(2, dims, nullptr), "dataspace"));
  h5::PropList lcpl(h5::check(H5Pcreate(H5P_LINK_CREATE), "link properties"));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  h5::Dataset ds(h5::check(H5Dcreate2(file, name, type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), name));
  if (!rows.empty()) h5::check_status(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), name);
}

void write_checkpoint_from(FuzzedDataProvider& in, const fs::path& path) {
  Header h;
  h.format_version = int(maybe(in, kFormatVersion));
  h.identity = job_identity();
  h.identity.model = maybe(in, h.identity.model);
  h.identity.model_signature = maybe(in, h.identity.model_signature);
  h.identity.flat_numel = maybe(in, kFlat);
  h.identity.optimizer = maybe(in, h.identity.optimizer);
  h.identity.seed = maybe(in, h.identity.seed);
  h.identity.global_batch = maybe(in, h.identity.global_batch);
  h.progress = {maybe(in, 5), maybe(in, 0), maybe(in, 5), maybe(in, 20), maybe(in, 5), maybe(in, -1)};
  h.origin = {"ddp", "", int(maybe(in, 2)), "[train]\nseed = 3\n"};
  h5::File file = h5::create_file(path.string());
  write_header(file.get(), h);
  for (const char* name : {"params", "optimizer/m", "optimizer/v"}) {
    if (in.ConsumeIntegralInRange<int>(0, 15) == 15) continue;  // missing
    const hsize_t dims[1] = {hsize_t(kFlat)};
    h5::Dataspace space(h5::check(H5Screate_simple(1, dims, nullptr), "dataspace"));
    h5::PropList lcpl(h5::check(H5Pcreate(H5P_LINK_CREATE), "link properties"));
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    h5::Dataset(h5::check(
        H5Dcreate2(file.get(), name, H5T_IEEE_F32LE, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), name));
  }
  // Two writers, each half of the buffer.
  const std::vector<int64_t> pieces = {0, 0, kFlat / 2, 1, kFlat / 2, kFlat};
  table<int64_t>(in, file.get(), "/layout/pieces", H5T_NATIVE_INT64, pieces, 3);
  table<uint32_t>(in, file.get(), "/checksums/crc32", H5T_NATIVE_UINT32, std::vector<uint32_t>(6, 0xabcd), 3);
  if (in.ConsumeIntegralInRange<int>(0, 7) < 7) {
    std::vector<int64_t> written = pieces;  // what the table holds, if the input kept it
    if (h5::has_object(file.get(), "/layout/pieces")) {
      h5::Dataset ds(h5::check(H5Dopen2(file.get(), "/layout/pieces", H5P_DEFAULT), "pieces"));
      h5::Dataspace fs(h5::check(H5Dget_space(ds.get()), "pieces"));
      written.assign(size_t(H5Sget_simple_extent_npoints(fs.get())), 0);
      if (!written.empty())
        h5::check_status(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, written.data()), "pieces");
    }
    h5::write_int_attribute(file.get(), "metadata_crc32", maybe(in, int64_t(metadata_crc32(h, written))));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  h5::silence_errors();
  const std::string seeds = fuzz::seed_dir();
  if (seeds.empty()) return 0;
  // Zero bytes decode to the valid checkpoint of a 2-rank DDP job.
  const std::vector<uint8_t> seed(128, 0);
  fuzz::write_file(fs::path(seeds) / "zeros", seed.data(), seed.size());
  FuzzedDataProvider in(seed.data(), seed.size());
  const bool sealed = in.ConsumeIntegralInRange<int>(0, 7) < 7;
  const fs::path path = fuzz::scratch_dir() / "step-00000005.h5";
  write_checkpoint_from(in, path);
  h5::File file = h5::open_file(path.string());
  (void)read_metadata(file.get(), job_identity(), {"params", "optimizer/m", "optimizer/v"}, sealed);  // or fails here
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = fuzz::scratch_dir() / "step-00000005.h5";
  fs::remove(path);
  FuzzedDataProvider in(data, size);
  const bool sealed = in.ConsumeIntegralInRange<int>(0, 7) < 7;  // what load() found before HDF5 opened it
  try {
    write_checkpoint_from(in, path);
  } catch (const Error&) {
    return 0;  // HDF5 refused to write what the input chose: nothing to read
  }
  fuzz::refusing_errors([&] {
    h5::File file = h5::open_file(path.string());
    (void)read_metadata(file.get(), job_identity(), {"params", "optimizer/m", "optimizer/v"}, sealed);
  });
  return 0;
}
