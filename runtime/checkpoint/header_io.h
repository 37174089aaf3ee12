// The checkpoint header as attributes of the file's root group (internal to
// runtime/checkpoint; the layout is in docs/formats.md).
#pragma once

#include "runtime/checkpoint/checkpoint.h"

#include <hdf5.h>

namespace shardtrain::checkpoint {

// Under parallel HDF5 every rank calls it with the same header (attribute
// writes are collective metadata operations).
void write_header(hid_t file, const Header& header);
// Errors name the attribute; the caller adds the file.
Header read_header_attributes(hid_t file);

}  // namespace shardtrain::checkpoint
