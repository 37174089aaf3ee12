#include "io/hdf5_handle.h"

#include "runtime/core/error.h"

#include <filesystem>

namespace shardtrain::io::h5 {

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

// H5Ewalk2 callback: with H5E_WALK_UPWARD the first record (n == 0) is the
// innermost one, where the problem was detected; the outer ones only repeat
// "unable to open file" on the way up.
herr_t take_innermost(unsigned n, const H5E_error2_t* record, void* out) {
  if (n == 0 && record->desc != nullptr) *static_cast<std::string*>(out) = record->desc;
  return 0;
}

}  // namespace

void throw_error(const std::string& what) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw Error(detail.empty() ? what : what + " (HDF5: " + detail + ")");
}

File open_file(const std::string& path, hid_t fapl) {
  silence_errors();
  std::error_code ec;
  ST_CHECK(std::filesystem::is_regular_file(path, ec), "{}: no such file", path);
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (id < 0) throw_error(path + ": cannot open as an HDF5 file");
  return File(id);
}

File create_file(const std::string& path) {
  silence_errors();
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) throw_error(path + ": cannot create HDF5 file");
  return File(id);
}

bool has_object(hid_t file, const std::string& name) {
  htri_t exists = H5Lexists(file, name.c_str(), H5P_DEFAULT);
  check_status(exists, "cannot look up " + name);
  return exists > 0;
}

std::string type_name(hid_t type) {
  const size_t bytes = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(8 * bytes);
    case H5T_FLOAT: return "float" + std::to_string(8 * bytes);
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM: return "enum (e.g. bool)";
    case H5T_VLEN: return "variable-length";
    case H5T_ARRAY: return "array";
    default: return "unknown type";
  }
}

}  // namespace shardtrain::io::h5
