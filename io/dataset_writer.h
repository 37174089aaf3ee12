// Writes one shard file of the current format version (docs/formats.md),
// with the checksum of every sample in /crc32.
//
// The file is written as `<path>.tmp` and renamed to `path` only once it is
// complete and flushed to disk, so an interrupted writer never leaves a half
// file under a shard's name (a reader ignores *.tmp). Samples may be appended
// in pieces, so a generator can write shards larger than its memory.
#pragma once

#include "io/hdf5_handle.h"
#include "io/shard_format.h"

#include <cstdint>
#include <string>

namespace shardtrain::io {

class ShardWriter {
 public:
  // Creates `<path>.tmp` for header.num_samples (>= 1) samples of
  // header.sample_shape and header.dtype, with every attribute written
  // (header.version is ignored: the file is shard_format::kVersion).
  ShardWriter(std::string path, const shard_format::ShardHeader& header);
  // Without finish(), the .tmp file is removed.
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Writes the next `count` samples: `x` holds count * sample_numel elements
  // of the header's dtype (uint8_t, uint16_t, int32_t or float), `y` count
  // labels, each in [0, num_classes).
  void append(const void* x, const int32_t* y, int64_t count);

  // Checks that all samples were written, closes, syncs and renames the file.
  void finish();

  // Samples per chunk of /x. Appending whole chunks at a time lets HDF5 write
  // each chunk straight from the caller's buffer, once.
  int64_t chunk_rows() const { return chunk_rows_; }

 private:
  void create_contents();
  // Closes everything and removes the .tmp file (best effort).
  void discard();

  std::string path_, tmp_path_;
  shard_format::ShardHeader header_;
  h5::File file_;
  h5::Dataset x_, y_, crc_;
  int64_t chunk_rows_ = 1;
  int64_t written_ = 0;
  bool finished_ = false;
};

// Writes a whole shard held in memory: x is header.num_samples samples.
void write_shard(const std::string& path, const shard_format::ShardHeader& header, const void* x, const int32_t* y);

// Removes shard files (and leftover .tmp files) of an earlier run with more
// than `shards` shards from `dir`, so that it holds exactly this run's; an
// Error naming a file it cannot remove.
void remove_stale_shards(const std::string& dir, int shards);

}  // namespace shardtrain::io
