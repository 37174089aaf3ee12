// What a checkpoint's reader checks before it trusts the file's metadata,
// and what its writer refuses to publish (internal to runtime/checkpoint and
// its tests; docs/formats.md describes the checks).
#pragma once

#include "runtime/checkpoint/checkpoint.h"

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace shardtrain::checkpoint {

// CRC-32 of the header's fields (lengths and values, in a fixed order) and of
// the pieces table, stored as the `metadata_crc32` attribute from format
// version 2 on: the tensor checksums cover the data, this covers what says
// how to read it (a flipped bit in `flat_numel` or in a piece's bounds would
// otherwise be acted on).
uint32_t metadata_crc32(const Header& header, std::span<const int64_t> pieces);

// The file's seal: its first kSealBytes (an HDF5 user block, which HDF5 and
// h5py skip) hold "shardtrain-checkpoint crc32 <8 hex> bytes <size>\n",
// the CRC-32 of every byte after them and the file's size. It is checked
// before HDF5 parses anything: libhdf5 can hang or crash on corrupt metadata
// (docs/reliability.md), and a checkpoint is the one HDF5 file whose bytes
// nothing else checks. Version 1 files have none.
inline constexpr int64_t kSealBytes = 512;
struct Seal {
  uint32_t crc32 = 0;
  int64_t bytes = 0;
};
// CRC-32 and size of `path` after the seal, each rank of `comm` reading an
// equal share (collective; the result is every rank's).
Seal compute_seal(const std::string& path, MPI_Comm comm);
// Writes the seal into the file's first kSealBytes (one process).
void write_seal(const std::string& path, const Seal& seal);
// The recorded seal; nullopt for a file that starts as HDF5 does (version 1).
// Anything else is an Error: neither a seal nor an HDF5 file.
std::optional<Seal> read_seal(const std::string& path);
// The file's bytes match its seal (collective): an Error saying how not.
void verify_seal(const std::string& path, const Seal& recorded, MPI_Comm comm);

// The checkpoint's metadata, read and checked: its header, the pieces table
// (rows of rank, flat_begin, flat_end) and the tensor checksums (world rows
// of one CRC-32 per tensor).
struct Metadata {
  Header header;
  std::vector<int64_t> pieces;
  std::vector<uint32_t> crcs;
};

// Reads what load() acts on before reading a tensor and checks it: the
// header's values in range and the same identity as `expected`, every
// tensor dataset present, the metadata CRC (version 2), the pieces table
// covering [0, flat_numel) exactly once with ranks in [0, world), and a
// checksum row per saved rank; a file of version 2 on must have been
// `sealed`. Errors say what is wrong; the caller adds the file.
Metadata read_metadata(hid_t file, const Identity& expected, const std::vector<std::string>& tensor_names, bool sealed);

// Index of the first element of data[0, n) that is NaN or infinite; -1 when
// all are finite.
int64_t first_non_finite(const float* data, int64_t n);

}  // namespace shardtrain::checkpoint
