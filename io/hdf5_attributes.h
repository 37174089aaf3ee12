// Reading and writing the scalar attributes shardtrain's formats use.
//
// Readers are lenient in the ways h5py users differ from each other: a string
// may be variable- or fixed-length (h5py writes `str` as the first, numpy
// `bytes_` as the second), an integer may have any width or sign, a float
// attribute may be stored as any float or integer type, and a one-element
// array counts as a scalar. Anything else is an Error naming the attribute;
// callers add the file name.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

namespace shardtrain::io::h5 {

bool has_attribute(hid_t object, const std::string& name);

std::string read_string_attribute(hid_t object, const std::string& name);
int64_t read_int_attribute(hid_t object, const std::string& name);
double read_float_attribute(hid_t object, const std::string& name);

// Written as h5py would write the same Python values: a variable-length UTF-8
// string, a 64-bit little-endian integer, a 32-bit little-endian float.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_int_attribute(hid_t object, const std::string& name, int64_t value);
void write_float_attribute(hid_t object, const std::string& name, float value);

}  // namespace shardtrain::io::h5
