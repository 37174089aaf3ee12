#include "io/hdf5_attributes.h"

#include "io/hdf5_handle.h"
#include "runtime/core/error.h"

#include <vector>

namespace shardtrain::io::h5 {

namespace {

// Opens `name` on `object` and checks it holds exactly one value.
Attribute open_scalar(hid_t object, const std::string& name) {
  ST_CHECK(has_attribute(object, name), "attribute '{}' is missing", name);
  Attribute attr(check(H5Aopen(object, name.c_str(), H5P_DEFAULT), "cannot open attribute '" + name + "'"));
  Dataspace space(check(H5Aget_space(attr.get()), "cannot read attribute '" + name + "'"));
  hssize_t points = H5Sget_simple_extent_npoints(space.get());
  ST_CHECK(points == 1, "attribute '{}' must be a single value, it has {}", name, points);
  return attr;
}

Type type_of(const Attribute& attr, const std::string& name) {
  return Type(check(H5Aget_type(attr.get()), "cannot read the type of attribute '" + name + "'"));
}

void write_scalar(hid_t object, const std::string& name, hid_t file_type, hid_t mem_type, const void* value) {
  Dataspace space(check(H5Screate(H5S_SCALAR), "cannot create a scalar dataspace"));
  Attribute attr(check(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       "cannot create attribute '" + name + "'"));
  check_status(H5Awrite(attr.get(), mem_type, value), "cannot write attribute '" + name + "'");
}

}  // namespace

bool has_attribute(hid_t object, const std::string& name) {
  htri_t exists = H5Aexists(object, name.c_str());
  check_status(exists, "cannot look up attribute '" + name + "'");
  return exists > 0;
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  Attribute attr = open_scalar(object, name);
  Type file_type = type_of(attr, name);
  ST_CHECK(H5Tget_class(file_type.get()) == H5T_STRING, "attribute '{}' must be a string, it is {}", name,
           type_name(file_type.get()));

  Type mem_type(check(H5Tcopy(H5T_C_S1), "cannot copy a string type"));
  H5Tset_cset(mem_type.get(), H5Tget_cset(file_type.get()));
  if (H5Tis_variable_str(file_type.get()) > 0) {
    H5Tset_size(mem_type.get(), H5T_VARIABLE);
    char* value = nullptr;
    check_status(H5Aread(attr.get(), mem_type.get(), static_cast<void*>(&value)),
                 "cannot read attribute '" + name + "'");
    std::string result = value != nullptr ? value : "";
    H5free_memory(value);
    return result;
  }
  // Fixed length: read as null-padded (HDF5 converts space padding), then cut
  // at the first null.
  const size_t size = H5Tget_size(file_type.get());
  H5Tset_size(mem_type.get(), size);
  H5Tset_strpad(mem_type.get(), H5T_STR_NULLPAD);
  std::vector<char> buffer(size + 1, '\0');
  check_status(H5Aread(attr.get(), mem_type.get(), buffer.data()), "cannot read attribute '" + name + "'");
  return std::string(buffer.data());
}

int64_t read_int_attribute(hid_t object, const std::string& name) {
  Attribute attr = open_scalar(object, name);
  Type file_type = type_of(attr, name);
  ST_CHECK(H5Tget_class(file_type.get()) == H5T_INTEGER, "attribute '{}' must be an integer, it is {}", name,
           type_name(file_type.get()));
  int64_t value = 0;
  check_status(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), "cannot read attribute '" + name + "'");
  return value;
}

double read_float_attribute(hid_t object, const std::string& name) {
  Attribute attr = open_scalar(object, name);
  Type file_type = type_of(attr, name);
  const H5T_class_t cls = H5Tget_class(file_type.get());
  ST_CHECK(cls == H5T_FLOAT || cls == H5T_INTEGER, "attribute '{}' must be a number, it is {}", name,
           type_name(file_type.get()));
  double value = 0;
  check_status(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value), "cannot read attribute '" + name + "'");
  return value;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  Type type(check(H5Tcopy(H5T_C_S1), "cannot copy a string type"));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const char* data = value.c_str();
  write_scalar(object, name, type.get(), type.get(), static_cast<const void*>(&data));
}

void write_int_attribute(hid_t object, const std::string& name, int64_t value) {
  write_scalar(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_float_attribute(hid_t object, const std::string& name, float value) {
  write_scalar(object, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &value);
}

}  // namespace shardtrain::io::h5
