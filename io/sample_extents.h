// Where each sample of a shard's /x lies in the file, so that samples can be
// read with plain pread calls, many in flight (io/read_pool.h), instead of
// one H5Dread at a time. The shard format stores /x in chunks along the
// sample axis with no filter (io/dataset_writer.cpp): a chunk is
// chunk_rows samples back to back, and HDF5 reports each chunk's address
// once. Only HDF5's I/O thread asks (ShardReader::x_extents); the map is
// then plain data any thread may read.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardtrain::io {

struct SampleExtents {
  int64_t num_samples = 0;
  int64_t chunk_rows = 0;  // samples per chunk (the last one may hold fewer)
  size_t sample_bytes = 0;
  std::vector<int64_t> chunk_offset;  // file offset of each chunk

  int64_t offset_of(int64_t sample) const {
    return chunk_offset[size_t(sample / chunk_rows)] + (sample % chunk_rows) * int64_t(sample_bytes);
  }
  // Calls piece(file_offset, first, count) for each stretch of the samples
  // [first, first + count) that is contiguous in the file: a run is cut
  // where it crosses into another chunk.
  template <class Piece>
  void for_each_piece(int64_t first, int64_t count, Piece&& piece) const {
    while (count > 0) {
      const int64_t in_chunk = std::min(count, chunk_rows - first % chunk_rows);
      piece(offset_of(first), first, in_chunk);
      first += in_chunk;
      count -= in_chunk;
    }
  }
};

}  // namespace shardtrain::io
