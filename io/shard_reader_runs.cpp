// ShardReader::read_x_runs: a batch's samples from one shard, one H5Dread per
// run of consecutive samples. Each call selects one regular hyperslab:
// HDF5 1.10 maps a regular hyperslab onto chunks directly, but an irregular
// one (a union of hyperslabs) element by element, which for 128 KiB samples
// made a batch 30x slower than the disk (docs/BENCHMARKS.md). Sorting the
// batch and merging neighbours into runs keeps the calls few when the order
// is local (data.order = "shard").
#include "io/shard_reader.h"

#include "runtime/core/error.h"

#include <array>
#include <exception>

namespace shardtrain::io {

void ShardReader::read_x_runs(const std::vector<Run>& runs, void* out, hid_t dxpl, int64_t calls) const {
  ST_ASSERT(calls >= int64_t(runs.size()));
  with_context(path_ + ": " + shard_format::kX, [&] {
    const int rank = header_.sample_shape.ndim() + 1;
    std::array<hsize_t, Shape::kMaxDims + 1> start{}, count{};
    for (int i = 1; i < rank; ++i) count[size_t(i)] = hsize_t(header_.sample_shape[i - 1]);
    const hid_t mem_type = shard_format::native_type(header_.dtype);
    const size_t sample_bytes = size_t(header_.sample_shape.numel()) * shard_format::dtype_size(header_.dtype);
    h5::Dataspace file_space(h5::check(H5Dget_space(x_.get()), "cannot read the shape"));
    char* dst = static_cast<char*>(out);
    // A failure must not break the sequence of calls: in a collective read
    // the other ranks wait for this rank's remaining calls. The first error
    // is thrown once every call was made, the failed ones as empty reads.
    std::exception_ptr first_error;
    for (int64_t c = 0; c < calls; ++c) {
      // Past this rank's runs (or after an error): an empty selection, joining the others' call.
      bool empty = c >= int64_t(runs.size()) || first_error;
      const Run r = empty ? Run{0, 1} : runs[size_t(c)];
      h5::Dataspace mem_space;
      try {
        ST_ASSERT(r.first >= 0 && r.count > 0 && r.first + r.count <= header_.num_samples);
        start[0] = hsize_t(r.first);
        count[0] = hsize_t(r.count);
        h5::check_status(
            H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
            "cannot select samples");
        mem_space = h5::Dataspace(h5::check(H5Screate_simple(rank, count.data(), nullptr), "cannot create dataspace"));
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
        empty = true;
        count[0] = 1;
        mem_space = h5::Dataspace(H5Screate_simple(rank, count.data(), nullptr));
      }
      if (empty) {
        H5Sselect_none(file_space.get());
        H5Sselect_none(mem_space.get());
      }
      try {
        h5::check_status(H5Dread(x_.get(), mem_type, mem_space.get(), file_space.get(), dxpl, dst),
                         fmt::format("cannot read samples [{}, {})", r.first, r.first + r.count));
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
      }
      if (!empty) dst += size_t(r.count) * sample_bytes;
    }
    if (first_error) std::rethrow_exception(first_error);
  });
}

}  // namespace shardtrain::io
