// RAII ownership of HDF5 identifiers, and the one place HDF5 failures become
// shardtrain::Error.
//
// HDF5 reports a failure as a negative return value plus a stack of error
// records that it prints to stderr by default. shardtrain silences that
// printing (it would interleave with every rank's output) and instead puts
// the innermost record, the one that says what actually went wrong ("file
// signature not found"), into the one-line Error message.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace shardtrain::io::h5 {

// Turns off HDF5's automatic printing of its error stack for this thread.
// Cheap; called by every function here that opens or creates a file.
void silence_errors();

// Throws shardtrain::Error "<what>: <innermost HDF5 error description>" and
// clears HDF5's error stack.
[[noreturn]] void throw_error(const std::string& what);

// Returns id, or throws (as throw_error) when HDF5 signalled failure (< 0).
inline hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw_error(what);
  return id;
}
inline herr_t check_status(herr_t status, const std::string& what) {
  if (status < 0) throw_error(what);
  return status;
}

// Owns one identifier and releases it with the matching close function.
// Move-only; an empty Id holds H5I_INVALID_HID.
template <herr_t (*Close)(hid_t)>
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  Id(Id&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

  // Closes now; a failure to close is reported (closing flushes file data).
  void close(const std::string& what) {
    hid_t id = std::exchange(id_, H5I_INVALID_HID);
    if (id >= 0) check_status(Close(id), what);
  }

 private:
  // Destructors cannot throw: a failure here is ignored (and, errors being
  // silenced, not printed). Paths that must know use close().
  void reset() {
    if (id_ >= 0) Close(std::exchange(id_, H5I_INVALID_HID));
  }
  hid_t id_ = H5I_INVALID_HID;
};

using File = Id<H5Fclose>;
using Group = Id<H5Gclose>;
using Dataset = Id<H5Dclose>;
using Dataspace = Id<H5Sclose>;
using Attribute = Id<H5Aclose>;
using Type = Id<H5Tclose>;
using PropList = Id<H5Pclose>;

// Opens an existing HDF5 file read-only; a missing file or one that is not
// HDF5 is an Error naming `path`. `fapl` selects the driver: the default
// (POSIX), or MPI-IO (io/mpio.h), which makes the open collective.
File open_file(const std::string& path, hid_t fapl = H5P_DEFAULT);
// Creates (truncating) an HDF5 file for writing.
File create_file(const std::string& path);

// Whether `name` (e.g. "/x") exists in the file. For names directly under
// the root group: a missing intermediate group is an error, not false.
bool has_object(hid_t file, const std::string& name);

// A readable name for an HDF5 datatype as users know it from numpy:
// "uint8", "int64", "float32", "string", "compound", ...
std::string type_name(hid_t type);

}  // namespace shardtrain::io::h5
