// ShardReader::x_extents: the file offsets of /x's chunks, read once from
// HDF5's chunk index, so that the loader can read samples without HDF5.
#include "io/shard_reader.h"

#include "runtime/core/error.h"

#include <array>

namespace shardtrain::io {

std::optional<SampleExtents> ShardReader::x_extents(std::string* why) const {
  auto refuse = [&](std::string reason) -> std::optional<SampleExtents> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  SampleExtents e;
  e.num_samples = header_.num_samples;
  e.sample_bytes = size_t(header_.sample_shape.numel()) * shard_format::dtype_size(header_.dtype);
  if (e.num_samples == 0) return e;
  h5::Type file_type(h5::check(H5Dget_type(x_.get()), "cannot read the dtype"));
  const hid_t native = shard_format::native_type(header_.dtype);
  if (H5Tequal(file_type.get(), native) <= 0) return refuse("/x is not stored in this machine's byte order");
  h5::PropList dcpl(h5::check(H5Dget_create_plist(x_.get()), "cannot read the storage properties"));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t at = H5Dget_offset(x_.get());
    if (at == HADDR_UNDEF) return refuse("/x has no storage allocated");
    e.chunk_rows = e.num_samples;
    e.chunk_offset.push_back(int64_t(at));
    return e;
  }
  if (layout != H5D_CHUNKED) return refuse("/x is neither chunked nor contiguous");
  if (H5Pget_nfilters(dcpl.get()) != 0) return refuse("/x is filtered (compressed): its bytes are not the samples");
  const int rank = header_.sample_shape.ndim() + 1;
  std::array<hsize_t, Shape::kMaxDims + 1> chunk{};
  if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank) return refuse("cannot read /x's chunk shape");
  for (int i = 1; i < rank; ++i)
    if (int64_t(chunk[size_t(i)]) != header_.sample_shape[i - 1])
      return refuse("/x's chunks cut through samples (chunked along more than the sample axis)");
  e.chunk_rows = int64_t(chunk[0]);
  const int64_t chunks = (e.num_samples + e.chunk_rows - 1) / e.chunk_rows;
  const hsize_t chunk_bytes = hsize_t(e.chunk_rows) * e.sample_bytes;
  std::array<hsize_t, Shape::kMaxDims + 1> coord{};
  e.chunk_offset.reserve(size_t(chunks));
  for (int64_t c = 0; c < chunks; ++c) {
    coord[0] = hsize_t(c) * hsize_t(e.chunk_rows);
    unsigned filter_mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(x_.get(), coord.data(), &filter_mask, &addr, &size) < 0 || addr == HADDR_UNDEF)
      return refuse(fmt::format("/x's chunk {} is not written", c));
    if (size != chunk_bytes) return refuse(fmt::format("/x's chunk {} holds {} bytes, not {}", c, size, chunk_bytes));
    e.chunk_offset.push_back(int64_t(addr));
  }
  return e;
}

}  // namespace shardtrain::io
