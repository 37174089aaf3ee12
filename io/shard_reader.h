// One shard file of format v1, opened for reading. Opening validates
// everything the file declares about itself (attributes, dataset types and
// shapes); the data is read on request. Checks that span shards (same split,
// all shard indices present, ...) belong to the caller. Every Error names the
// file.
#pragma once

#include "io/format_v1.h"
#include "io/hdf5_handle.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::io {

class ShardReader {
 public:
  explicit ShardReader(std::string path);

  const std::string& path() const { return path_; }
  const format_v1::ShardHeader& header() const { return header_; }

  // Reads samples [first, first + count) of /x into `out`, which holds
  // count * sample_numel elements of header().dtype.
  void read_x(int64_t first, int64_t count, void* out) const;

  // Reads /y as int32 and checks that every label is in [0, num_classes).
  std::vector<int32_t> read_labels() const;

 private:
  void read_root_attributes();
  void open_x();
  void open_y();

  std::string path_;
  h5::File file_;
  h5::Dataset x_, y_;
  format_v1::ShardHeader header_;
};

}  // namespace shardtrain::io
