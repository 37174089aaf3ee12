// One shard file (format version 1 or 2), opened for reading. Opening validates
// everything the file declares about itself (attributes, dataset types and
// shapes); the data is read on request. Checks that span shards (same split,
// all shard indices present, ...) belong to the caller. Every Error names the
// file.
#pragma once

#include "io/hdf5_handle.h"
#include "io/sample_extents.h"
#include "io/shard_format.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::io {

namespace shard_format {
// /x's HDF5 element type as shardtrain's writers store it (little-endian),
// and as this machine's memory holds it (what reads convert to).
hid_t stored_type(SampleDType dtype);
hid_t native_type(SampleDType dtype);
}  // namespace shard_format

class ShardReader {
 public:
  // `fapl`: HDF5 file access properties (default: POSIX; io/mpio.h for
  // parallel HDF5, where the open is collective over the fapl's communicator).
  explicit ShardReader(std::string path, hid_t fapl = H5P_DEFAULT);

  const std::string& path() const { return path_; }
  const shard_format::ShardHeader& header() const { return header_; }

  // Reads samples [first, first + count) of /x into `out`, which holds
  // count * sample_numel elements of header().dtype.
  void read_x(int64_t first, int64_t count, void* out) const;

  // Reads the samples of `runs` (sorted, disjoint [first, first + count)
  // ranges) into `out`, back to back in file order, one H5Dread per run with
  // the transfer properties `dxpl` (collective or independent MPI-IO), then
  // `calls - runs.size()` reads of nothing: in a collective read every rank
  // makes as many calls as the rank with the most runs.
  struct Run {
    int64_t first = 0, count = 0;
  };
  void read_x_runs(const std::vector<Run>& runs, void* out, hid_t dxpl, int64_t calls) const;

  // Where /x's samples lie in the file (io/sample_extents.h), when its
  // bytes are the samples as the memory holds them: chunked along the sample
  // axis or contiguous, no filter, every chunk written, the native byte
  // order. Otherwise nothing, and `why` says what stands in the way (the
  // caller reads through HDF5 instead).
  std::optional<SampleExtents> x_extents(std::string* why) const;

  // Reads /y as int32 and checks that every label is in [0, num_classes).
  std::vector<int32_t> read_labels() const;

  // Reads /crc32 (shard_format::verify_samples checks samples against it);
  // empty for a version 1 file, which has none.
  std::vector<uint32_t> read_checksums() const;

 private:
  void read_root_attributes();
  void open_x();
  void open_y();
  void open_checksums();

  std::string path_;
  h5::File file_;
  h5::Dataset x_, y_, crc_;
  shard_format::ShardHeader header_;
};

}  // namespace shardtrain::io
