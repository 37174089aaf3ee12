#include "runtime/checkpoint/integrity.h"

#include "io/hdf5_attributes.h"
#include "io/hdf5_handle.h"
#include "io/manifest.h"
#include "runtime/checkpoint/header_io.h"
#include "runtime/core/error.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <string_view>
#include <utility>

namespace shardtrain::checkpoint {
namespace {

namespace h5 = io::h5;

// Far above any job (a checksum row per rank is allocated from it), far
// below what a flipped high bit makes of it.
constexpr int64_t kMaxWorld = int64_t(1) << 20;
constexpr hsize_t kMaxPieceRows = hsize_t(1) << 26;
constexpr const char* kSealMagic = "shardtrain-checkpoint";

void append(std::string& out, const char* key, const std::string& value) {
  out += fmt::format("{}:{}:{}\n", key, value.size(), value);
}
void append(std::string& out, const char* key, int64_t value) { out += fmt::format("{}={}\n", key, value); }

// A 2-D table of int64 or uint32 with `cols` columns and at most `max_rows`
// rows (checked before anything is allocated).
template <typename T>
std::vector<T> read_table(hid_t file, const std::string& name, hsize_t cols, hsize_t max_rows) {
  ST_CHECK(h5::has_object(file, name), "dataset {} is missing", name);
  h5::Dataset ds(h5::check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "cannot open " + name));
  h5::Dataspace fs(h5::check(H5Dget_space(ds.get()), "cannot get a dataspace"));
  hsize_t dims[2] = {0, 0};
  ST_CHECK(H5Sget_simple_extent_ndims(fs.get()) == 2, "dataset {} is not a table", name);
  H5Sget_simple_extent_dims(fs.get(), dims, nullptr);
  ST_CHECK(dims[1] == cols, "dataset {} has {} columns, expected {}", name, dims[1], cols);
  ST_CHECK(dims[0] <= max_rows, "dataset {} has {} rows, at most {} expected", name, dims[0], max_rows);
  std::vector<T> v(dims[0] * dims[1]);
  const hid_t mem_type = std::is_same_v<T, int64_t> ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT32;
  if (!v.empty())
    h5::check_status(H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "cannot read " + name);
  return v;
}

void check_header_values(const Header& h) {
  ST_CHECK(h.origin.world >= 1 && h.origin.world <= kMaxWorld, "world_size = {} is out of range [1, {}]",
           h.origin.world, kMaxWorld);
  const std::pair<const char*, int64_t> counts[] = {
      {"step", h.progress.step},
      {"sampler_epoch", h.progress.epoch},
      {"sampler_batch", h.progress.batch},
      {"schedule_total_steps", h.progress.total_steps},
      {"optimizer_steps", h.progress.optimizer_steps},
  };
  for (const auto& [name, value] : counts) ST_CHECK(value >= 0, "{} = {} is negative", name, value);
  ST_CHECK(h.progress.target_reached_ms >= -1, "target_reached_ms = {} is below -1", h.progress.target_reached_ms);
}

// Every element of the flat buffer written exactly once, by a rank that
// exists: a missing rank's shard is a gap.
void check_pieces(const Header& h, const std::vector<int64_t>& pieces) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < pieces.size(); i += 3) {
    ST_CHECK(pieces[i] >= 0 && pieces[i] < h.origin.world, "/layout/pieces names rank {} of {}", pieces[i],
             h.origin.world);
    ST_CHECK(pieces[i + 1] >= 0 && pieces[i + 1] <= pieces[i + 2] && pieces[i + 2] <= h.identity.flat_numel,
             "/layout/pieces holds [{}, {}), outside [0, {})", pieces[i + 1], pieces[i + 2], h.identity.flat_numel);
    ranges.emplace_back(pieces[i + 1], pieces[i + 2]);
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t covered = 0;
  for (const auto& [lo, hi] : ranges) {
    ST_CHECK(lo <= covered, "flat elements [{}, {}) were not written (a rank's shard is missing)", covered, lo);
    ST_CHECK(lo == covered, "flat elements [{}, {}) were written twice (the pieces overlap)", lo, covered);
    covered = hi;
  }
  ST_CHECK(covered == h.identity.flat_numel, "flat elements [{}, {}) were not written (a rank's shard is missing)",
           covered, h.identity.flat_numel);
}

// The seal's text as write_seal makes it: the magic, " crc32 " and 8 hex
// digits, " bytes " and a decimal, a newline.
std::optional<Seal> parse_seal(std::string_view text) {
  auto skip = [&](std::string_view prefix) {
    if (!text.starts_with(prefix)) return false;
    text.remove_prefix(prefix.size());
    return true;
  };
  Seal seal;
  if (!skip(kSealMagic) || !skip(" crc32 ")) return std::nullopt;
  const auto crc = std::from_chars(text.data(), text.data() + text.size(), seal.crc32, 16);
  if (crc.ec != std::errc() || crc.ptr != text.data() + 8) return std::nullopt;
  text.remove_prefix(8);
  if (!skip(" bytes ")) return std::nullopt;
  const auto bytes = std::from_chars(text.data(), text.data() + text.size(), seal.bytes);
  if (bytes.ec != std::errc() || bytes.ptr == text.data() + text.size() || *bytes.ptr != '\n') return std::nullopt;
  return seal;
}

}  // namespace

uint32_t metadata_crc32(const Header& h, std::span<const int64_t> pieces) {
  std::string s;
  append(s, "format_version", h.format_version);
  append(s, "model", h.identity.model);
  append(s, "model_signature", h.identity.model_signature);
  append(s, "flat_numel", h.identity.flat_numel);
  append(s, "optimizer", h.identity.optimizer);
  for (const std::string& name : h.identity.state_names) append(s, "state", name);
  append(s, "seed", h.identity.seed);
  append(s, "global_batch", h.identity.global_batch);
  append(s, "step", h.progress.step);
  append(s, "epoch", h.progress.epoch);
  append(s, "batch", h.progress.batch);
  append(s, "total_steps", h.progress.total_steps);
  append(s, "optimizer_steps", h.progress.optimizer_steps);
  append(s, "target_reached_ms", h.progress.target_reached_ms);
  append(s, "strategy", h.origin.strategy);
  append(s, "sharding", h.origin.sharding);
  append(s, "world", h.origin.world);
  append(s, "config", h.origin.config_toml);
  for (const int64_t v : pieces) append(s, "piece", v);
  return uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

Seal compute_seal(const std::string& path, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  ST_CHECK(!ec, "{}: cannot read its size: {}", path, ec.message());
  const int64_t body = std::max<int64_t>(0, int64_t(file_size) - kSealBytes);
  const int64_t share = (body + size - 1) / size;
  const int64_t begin = std::min(body, int64_t(rank) * share), length = std::min(share, body - begin);
  // {CRC, read} per rank: a rank that cannot read its share still takes
  // part in the gather, and every rank then fails alike.
  uint32_t mine[2] = {0, 1};
  std::string error;
  try {
    mine[0] = io::file_crc32(path, kSealBytes + begin, length);
  } catch (const Error& e) {
    mine[1] = 0;
    error = e.what();
  }
  std::vector<uint32_t> all(2 * size_t(size));
  MPI_Allgather(mine, 2, MPI_UINT32_T, all.data(), 2, MPI_UINT32_T, comm);
  for (int r = 0; r < size; ++r)
    ST_CHECK(all[2 * size_t(r) + 1] == 1, "{}", r == rank ? error : fmt::format("rank {} cannot read its share", r));
  // The shares' CRCs chained in file order, as one pass over the body would give.
  uLong crc = all[0];
  for (int r = 1; r < size; ++r) {
    const int64_t b = std::min(body, int64_t(r) * share);
    crc = crc32_combine64(crc, all[2 * size_t(r)], std::min(share, body - b));
  }
  return Seal{uint32_t(crc), int64_t(file_size)};
}

void write_seal(const std::string& path, const Seal& seal) {
  std::string block = fmt::format("{} crc32 {:08x} bytes {}\n", kSealMagic, seal.crc32, seal.bytes);
  block.resize(size_t(kSealBytes), '\0');
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, "{}: cannot open to seal: {}", path, std::strerror(errno));
  const ssize_t n = ::pwrite(fd, block.data(), block.size(), 0);
  const int err = errno;
  ::close(fd);
  ST_CHECK(n == ssize_t(block.size()), "{}: cannot write its seal: {}", path, std::strerror(err));
}

std::optional<Seal> read_seal(const std::string& path) {
  char block[kSealBytes] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  const ssize_t n = ::pread(fd, block, sizeof block, 0);
  ::close(fd);
  constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
  if (n >= 8 && std::memcmp(block, kHdf5Signature, 8) == 0) return std::nullopt;
  const std::optional<Seal> seal = n == kSealBytes ? parse_seal(std::string_view(block, size_t(n))) : std::nullopt;
  ST_CHECK(seal.has_value(),
           "neither a sealed shardtrain checkpoint nor an HDF5 file (its first {} bytes are corrupt or missing)",
           kSealBytes);
  return seal;
}

void verify_seal(const std::string& path, const Seal& recorded, MPI_Comm comm) {
  const Seal actual = compute_seal(path, comm);
  ST_CHECK(actual.bytes == recorded.bytes, "{} bytes, {} when written: the file is truncated or was appended to",
           actual.bytes, recorded.bytes);
  ST_CHECK(actual.crc32 == recorded.crc32,
           "its bytes fail their checksum (CRC-32 {:08x}, recorded {:08x}): the file is corrupt", actual.crc32,
           recorded.crc32);
}

Metadata read_metadata(hid_t file, const Identity& expected, const std::vector<std::string>& tensor_names,
                       bool sealed) {
  Metadata m;
  m.header = read_header_attributes(file);
  ST_CHECK(m.header.format_version < 2 || sealed,
           "format version {} without the seal that version writes (its first {} bytes): the file is corrupt",
           m.header.format_version, kSealBytes);
  check_header_values(m.header);
  const std::string differs = identity_mismatch(m.header.identity, expected);
  ST_CHECK(differs.empty(), "written for another model or config: {}", differs);
  for (const std::string& name : tensor_names) {
    const size_t slash = name.find('/');  // "optimizer/m": its group first
    const bool group = slash == std::string::npos || h5::has_object(file, fmt::format("/{}", name.substr(0, slash)));
    ST_CHECK(group && h5::has_object(file, name), "dataset {} is missing", name);
  }
  m.pieces = read_table<int64_t>(file, "/layout/pieces", 3, kMaxPieceRows);
  if (m.header.format_version >= 2) {
    ST_CHECK(io::h5::has_attribute(file, "metadata_crc32"), "the metadata_crc32 attribute is missing");
    const int64_t want = io::h5::read_int_attribute(file, "metadata_crc32");
    const uint32_t got = metadata_crc32(m.header, m.pieces);
    ST_CHECK(want == int64_t(got),
             "the header or /layout/pieces fails its checksum (CRC-32 {:08x}, recorded {:08x}): the file is corrupt",
             got, uint32_t(want));
  }
  check_pieces(m.header, m.pieces);
  const size_t tensors = tensor_names.size();
  m.crcs = read_table<uint32_t>(file, "/checksums/crc32", tensors, hsize_t(m.header.origin.world));
  ST_CHECK(m.crcs.size() == size_t(m.header.origin.world) * tensors,
           "/checksums/crc32 has {} rows, the file was written by {} ranks",
           m.crcs.size() / std::max<size_t>(1, tensors), m.header.origin.world);
  return m;
}

int64_t first_non_finite(const float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(data[i])) return i;
  return -1;
}

}  // namespace shardtrain::checkpoint
