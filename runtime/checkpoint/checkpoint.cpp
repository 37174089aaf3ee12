#include "runtime/checkpoint/checkpoint.h"

#include "io/hdf5_attributes.h"
#include "io/hdf5_handle.h"
#include "io/durable_file.h"
#include "io/mpio.h"
#include "runtime/checkpoint/disk_space.h"
#include "runtime/checkpoint/header_io.h"
#include "runtime/checkpoint/integrity.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/error.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace shardtrain::checkpoint {
namespace {

namespace h5 = io::h5;

struct Comm {
  MPI_Comm comm;
  int rank = 0, size = 1;
  explicit Comm(MPI_Comm c) : comm(c) {
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
  }
};

// Runs f on every rank; any rank's error becomes every rank's (a collective
// HDF5 call after a one-rank throw would hang the others).
template <typename F>
void agreed(const Comm& c, F&& f) {
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = e.what();
  }
  comm::agree_or_throw(c.comm, error);
}

// The rank's pieces as selections: of the file's 1-D dataset, and of its
// local buffer of `local_numel` elements. No pieces: empty selections (the
// rank still takes part in the collective call).
struct Selections {
  h5::Dataspace file, memory;
};

Selections select(hid_t dataset, const Pieces& pieces, int64_t local_numel) {
  Selections s;
  s.file = h5::Dataspace(h5::check(H5Dget_space(dataset), "cannot get a dataset's dataspace"));
  const hsize_t mem_dims[1] = {hsize_t(std::max<int64_t>(1, local_numel))};
  s.memory = h5::Dataspace(h5::check(H5Screate_simple(1, mem_dims, nullptr), "cannot create a dataspace"));
  if (pieces.empty()) {
    H5Sselect_none(s.file.get());
    H5Sselect_none(s.memory.get());
    return s;
  }
  // HDF5 pairs the elements of joined selections in coordinate order, so the
  // pieces must increase in both the file and the local buffer.
  for (size_t i = 1; i < pieces.size(); ++i)
    ST_CHECK(pieces[i].flat_begin >= pieces[i - 1].flat_end && pieces[i].local_offset >= pieces[i - 1].local_offset,
             "checkpoint: pieces out of order ([{}, {}) at {} after [{}, {}) at {})", pieces[i].flat_begin,
             pieces[i].flat_end, pieces[i].local_offset, pieces[i - 1].flat_begin, pieces[i - 1].flat_end,
             pieces[i - 1].local_offset);
  bool first = true;
  for (const Piece& p : pieces) {
    const hsize_t fstart[1] = {hsize_t(p.flat_begin)}, mstart[1] = {hsize_t(p.local_offset)},
                  count[1] = {hsize_t(p.numel())};
    const H5S_seloper_t op = first ? H5S_SELECT_SET : H5S_SELECT_OR;
    h5::check_status(H5Sselect_hyperslab(s.file.get(), op, fstart, nullptr, count, nullptr), "cannot select");
    h5::check_status(H5Sselect_hyperslab(s.memory.get(), op, mstart, nullptr, count, nullptr), "cannot select");
    first = false;
  }
  return s;
}

uint32_t crc_of(const float* local, const Pieces& pieces) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  for (const Piece& p : pieces)
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(local + p.local_offset), size_t(p.numel()) * sizeof(float));
  return uint32_t(crc);
}

// A host copy of t (t itself when it is on the CPU).
Tensor on_host(const Tensor& t) { return t.device().is_cpu() ? t : to_device(t, Device::cpu()); }

std::vector<std::pair<std::string, Tensor>> tensors_of(const Buffers& b) {
  std::vector<std::pair<std::string, Tensor>> all{{"params", b.params}};
  for (const auto& [name, t] : b.state) all.push_back({"optimizer/" + name, t});
  return all;
}

// Link creation that makes missing groups ("optimizer/m").
h5::PropList with_groups() {
  h5::PropList lcpl(h5::check(H5Pcreate(H5P_LINK_CREATE), "cannot create link properties"));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}

h5::Dataset create_f32(hid_t file, const std::string& name, int64_t numel) {
  const hsize_t dims[1] = {hsize_t(numel)};
  h5::Dataspace space(h5::check(H5Screate_simple(1, dims, nullptr), "cannot create a dataspace"));
  h5::PropList dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "cannot create dataset properties"));
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);  // every element is written
  return h5::Dataset(h5::check(
      H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space.get(), with_groups().get(), dcpl.get(), H5P_DEFAULT),
      "cannot create dataset " + name));
}

// Rank 0 writes a small 2-D int64 or u32 table every rank knows.
template <typename T>
void write_table(hid_t file, const std::string& name, hid_t type, const std::vector<T>& values, int64_t cols,
                 bool writer) {
  const hsize_t dims[2] = {hsize_t(values.size() / size_t(cols)), hsize_t(cols)};
  h5::Dataspace space(h5::check(H5Screate_simple(2, dims, nullptr), "cannot create a dataspace"));
  h5::Dataset ds(
      h5::check(H5Dcreate2(file, name.c_str(), type, space.get(), with_groups().get(), H5P_DEFAULT, H5P_DEFAULT),
                "cannot create dataset " + name));
  h5::Dataspace fs(h5::check(H5Dget_space(ds.get()), "cannot get a dataspace"));
  h5::Dataspace ms(h5::check(H5Screate_simple(2, dims, nullptr), "cannot create a dataspace"));
  if (!writer) {
    H5Sselect_none(fs.get());
    H5Sselect_none(ms.get());
  }
  h5::PropList dxpl = io::mpio::transfer(io::Transfer::collective);
  const hid_t mem_type = std::is_same_v<T, int64_t> ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT32;
  h5::check_status(H5Dwrite(ds.get(), mem_type, ms.get(), fs.get(), dxpl.get(), values.data()), "cannot write " + name);
  ds.close("cannot close " + name);
}

// About the file's size, reserved before the writes (disk_space.h): the
// datasets, the two tables, the header's strings, and 64 KiB for HDF5's own
// structures (superblock, object headers, the root group's heap).
int64_t expected_bytes(const Header& h, size_t tensors, int world, size_t pieces) {
  const int64_t data = int64_t(tensors) * h.identity.flat_numel * int64_t(sizeof(float));
  const int64_t tables = int64_t(pieces) * 3 * 8 + int64_t(world) * int64_t(tensors) * 4;
  const int64_t strings = int64_t(h.origin.config_toml.size() + h.identity.model_signature.size());
  return kSealBytes + data + tables + strings + (64 << 10);
}

// The collective writes of an open file, each step agreed on: a rank whose
// write fails (a full disk fails only the ranks whose bytes did not fit)
// makes every rank stop at the same step, so that none goes on into a
// collective call the others never reach.
void write_contents(hid_t file, const Comm& c, const std::string& tmp, const Header& written, const Buffers& b,
                    const std::function<void()>& after_params) {
  const auto tensors = tensors_of(b);
  agreed(c, [&] { write_header(file, written); });
  std::vector<uint32_t> my_crcs;
  h5::PropList dxpl = io::mpio::transfer(io::Transfer::collective);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    const Tensor host = on_host(t);
    agreed(c, [&] {
      h5::Dataset ds = create_f32(file, name, written.identity.flat_numel);
      Selections s = select(ds.get(), b.write, host.numel());
      h5::check_status(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, s.memory.get(), s.file.get(), dxpl.get(), host.f32()),
                       fmt::format("{}: cannot write {}", tmp, name));
      ds.close(fmt::format("{}: cannot close {}", tmp, name));
    });
    my_crcs.push_back(crc_of(host.f32(), b.write));
    if (i == 0 && after_params) after_params();
  }
  // Who wrote what, and the checksums of what each rank wrote.
  const int64_t my_pieces = int64_t(b.write.size());
  std::vector<int64_t> counts(size_t(c.size));
  MPI_Allgather(&my_pieces, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, c.comm);
  std::vector<int64_t> mine, all;
  for (const Piece& p : b.write) mine.insert(mine.end(), {int64_t(c.rank), p.flat_begin, p.flat_end});
  std::vector<int> recv_counts(size_t(c.size)), displs(size_t(c.size));
  for (int r = 0, at = 0; r < c.size; ++r) {
    recv_counts[size_t(r)] = int(counts[size_t(r)] * 3);
    displs[size_t(r)] = at;
    at += recv_counts[size_t(r)];
  }
  all.resize(size_t(displs.back()) + size_t(recv_counts.back()));
  MPI_Allgatherv(mine.data(), int(mine.size()), MPI_INT64_T, all.data(), recv_counts.data(), displs.data(), MPI_INT64_T,
                 c.comm);
  std::vector<uint32_t> crcs(size_t(c.size) * tensors.size());
  MPI_Allgather(my_crcs.data(), int(my_crcs.size()), MPI_UINT32_T, crcs.data(), int(my_crcs.size()), MPI_UINT32_T,
                c.comm);
  agreed(c, [&] {
    write_table(file, "/layout/pieces", H5T_STD_I64LE, all, 3, c.rank == 0);
    io::h5::write_int_attribute(file, "metadata_crc32", int64_t(metadata_crc32(written, all)));
    write_table(file, "/checksums/crc32", H5T_STD_U32LE, crcs, int64_t(tensors.size()), c.rank == 0);
  });
}

}  // namespace

void save(const std::string& path, MPI_Comm mpi_comm, const Header& header, const Buffers& b,
          const std::function<void()>& after_params) {
  const Comm c(mpi_comm);
  const std::string tmp = path + ".tmp";
  const auto tensors = tensors_of(b);
  Header written = header;
  written.format_version = kFormatVersion;
  // A NaN or an infinity would be resumed from and never trained away: such
  // a checkpoint is refused before anything is written, so that the newest
  // file on disk is the last finite state. Checked in a pass of its own
  // (a device tensor is copied twice) so that no rank starts the
  // collective writes of a file another rank refuses.
  agreed(c, [&] {
    for (const auto& [name, t] : tensors) {
      const Tensor host = on_host(t);
      for (const Piece& p : b.write) {
        const int64_t at = first_non_finite(host.f32() + p.local_offset, p.numel());
        ST_CHECK(at < 0,
                 "step {}: {} holds {} at flat element {} (rank {}): the checkpoint is not written, so that "
                 "--resume auto continues from the last finite one",
                 header.progress.step, name, host.f32()[p.local_offset + at], p.flat_begin + at, c.rank);
      }
    }
  });
  // Every rank makes and checks the directory: where it is node-local (or a
  // relative path from another working directory) the others would wait
  // in the collective create for a rank that cannot write there.
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? "." : parent;
  agreed(c, [&] {
    io::make_parent_directory(path);
    ST_CHECK(::access(dir.c_str(), W_OK) == 0, "{}: rank {} cannot write the checkpoint directory: {}", dir, c.rank,
             std::strerror(errno));
  });
  agreed(c, [&] {
    if (c.rank != 0) return;
    try {
      keep_close_reserve(dir);
    } catch (const Error& e) {  // said as a failed write says it: the file, the cause, the free space
      throw Error(fmt::format("{}: writing the checkpoint failed: {}{}", tmp, e.what(), free_space_note(dir)));
    }
  });
  h5::File file;
  agreed(c, [&] {
    h5::silence_errors();
    h5::PropList fapl = io::mpio::file_access(mpi_comm);
    h5::PropList fcpl(h5::check(H5Pcreate(H5P_FILE_CREATE), "cannot create file properties"));
    h5::check_status(H5Pset_userblock(fcpl.get(), hsize_t(kSealBytes)), "cannot reserve the seal");
    file = h5::File(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
    if (!file.valid()) h5::throw_error(tmp + ": cannot create the checkpoint file");
  });
  try {
    agreed(c, [&] {
      int64_t pieces = int64_t(b.write.size());
      MPI_Allreduce(MPI_IN_PLACE, &pieces, 1, MPI_INT64_T, MPI_SUM, mpi_comm);
      if (c.rank == 0) reserve_space(tmp, expected_bytes(written, tensors.size(), c.size, size_t(pieces)));
    });
    write_contents(file.get(), c, tmp, written, b, after_params);
    agreed(c, [&] { file.close(tmp + ": cannot close the checkpoint file"); });
  } catch (const std::exception& e) {
    // Every rank is here, after the same step (each one agreed). HDF5
    // cannot close a file on a full disk (closing flushes; the flush fails
    // on some ranks only, and they leave the others in another collective),
    // and a file it could not close crashes it at MPI_Finalize: the file's
    // space and the close reserve are freed first, so that the close
    // succeeds, then the file and what MPI-IO kept beside it are removed.
    const std::string space = free_space_note(dir);
    if (c.rank == 0) {
      if (::truncate(tmp.c_str(), 0) != 0) {  // best effort: the error below is the one to report
      }
      release_close_reserve(dir);
    }
    MPI_Barrier(mpi_comm);
    try {
      file.close(tmp + ": cannot close the failed checkpoint file");
    } catch (const std::exception&) {  // ignored: as above
    }
    MPI_Barrier(mpi_comm);
    if (c.rank == 0) remove_with_siblings(tmp);
    MPI_Barrier(mpi_comm);
    std::string cause = e.what();
    if (cause.starts_with(tmp + ": ")) cause.erase(0, tmp.size() + 2);
    const auto* agreed_error = dynamic_cast<const comm::AgreedError*>(&e);
    throw comm::AgreedError(fmt::format("{}: writing the checkpoint failed: {}{}", tmp, cause, space),
                            agreed_error != nullptr && agreed_error->whole_world());
  }
  // Every rank checksums a share of the closed file; rank 0 seals it, gives
  // back the reserve HDF5 did not use and publishes it (fsync, rename, fsync
  // the directory).
  const Seal seal = with_context(tmp, [&] { return compute_seal(tmp, mpi_comm); });
  agreed(c, [&] {
    if (c.rank != 0) return;
    write_seal(tmp, seal);
    release_unused_space(tmp);
    io::publish(tmp, path);
  });
}

Header read_header(const std::string& path) {
  return with_context(path, [&] {
    h5::File file = h5::open_file(path);
    return read_header_attributes(file.get());
  });
}

Header load(const std::string& path, MPI_Comm mpi_comm, const Identity& expected, Buffers& b) {
  const Comm c(mpi_comm);
  h5::File file;
  Header header;
  std::vector<int64_t> pieces;
  std::vector<uint32_t> crcs;
  const auto tensors = tensors_of(b);
  // Every rank must see the file before the collective open (which would
  // wait for a rank that cannot).
  agreed(c, [&] {
    std::error_code ec;
    ST_CHECK(!std::filesystem::is_directory(path, ec),
             "{} is a directory: name a checkpoint file in it, or resume with --resume auto and the run "
             "directory",
             path);
    ST_CHECK(std::filesystem::is_regular_file(path, ec),
             "{}: no such file on rank {} (a checkpoint must be "
             "visible to every rank: a shared file system, and an absolute path)",
             path, c.rank);
  });
  // The file's bytes against its seal, before HDF5 parses them.
  std::optional<Seal> seal;
  agreed(c, [&] { seal = with_context(path, [&] { return read_seal(path); }); });
  if (seal) {
    try {  // every rank computes the same seal, so every rank throws alike
      with_context(path, [&] { verify_seal(path, *seal, mpi_comm); });
    } catch (const Error& e) {
      throw DamagedCheckpoint(e.what());
    }
  }
  agreed(c, [&] {
    h5::PropList fapl = io::mpio::file_access(mpi_comm);
    file = h5::open_file(path, fapl.get());  // its errors name the file
    with_context(path, [&] {
      std::vector<std::string> names;
      names.reserve(tensors.size());
      for (const auto& [name, t] : tensors) names.push_back(name);
      Metadata m = read_metadata(file.get(), expected, names, seal.has_value());
      header = std::move(m.header);
      pieces = std::move(m.pieces);
      crcs = std::move(m.crcs);
    });
  });
  // Every rank opens every dataset (opening is collective in parallel HDF5).
  std::vector<h5::Dataset> datasets;
  agreed(c, [&] {
    for (const auto& [name, t] : tensors)
      datasets.emplace_back(
          h5::check(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), fmt::format("{}: cannot open {}", path, name)));
  });
  // The saved ranks' checksums, verified round-robin by the current ranks
  // (independent reads).
  agreed(c, [&] {
    for (int saved = c.rank; saved < header.origin.world; saved += c.size) {
      Pieces theirs;
      int64_t extent = 0;
      for (size_t i = 0; i < pieces.size(); i += 3)
        if (pieces[i] == saved) {
          theirs.push_back({pieces[i + 1], pieces[i + 2], extent});
          extent += pieces[i + 2] - pieces[i + 1];
        }
      std::vector<float> data(size_t(std::max<int64_t>(1, extent)));
      for (size_t k = 0; k < tensors.size(); ++k) {
        const std::string& name = tensors[k].first;
        Selections s = select(datasets[k].get(), theirs, extent);
        h5::check_status(
            H5Dread(datasets[k].get(), H5T_NATIVE_FLOAT, s.memory.get(), s.file.get(), H5P_DEFAULT, data.data()),
            fmt::format("{}: cannot read {}", path, name));
        const uint32_t want = crcs[size_t(saved) * tensors.size() + k], got = crc_of(data.data(), theirs);
        ST_CHECK(got == want,
                 "{}: {} as written by rank {} fails its checksum (CRC-32 {:08x}, recorded {:08x}): "
                 "the file is corrupt",
                 path, name, saved, got, want);
      }
    }
  });
  // Each rank's pieces of the current layout (collective reads).
  agreed(c, [&] {
    h5::PropList dxpl = io::mpio::transfer(io::Transfer::collective);
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto& [name, t] = tensors[k];
      Tensor host = t.device().is_cpu() ? t : Tensor::empty(t.shape(), t.dtype());
      host.fill_zero();
      Selections s = select(datasets[k].get(), b.read, host.numel());
      h5::check_status(
          H5Dread(datasets[k].get(), H5T_NATIVE_FLOAT, s.memory.get(), s.file.get(), dxpl.get(), host.f32()),
          fmt::format("{}: cannot read {}", path, name));
      if (!t.device().is_cpu()) copy_tensor(t, host);
    }
    datasets.clear();
    file.close(path + ": cannot close");
  });
  return header;
}

}  // namespace shardtrain::checkpoint
