// A split's manifest: <split dir>/manifest.json, written next to the shard
// files by every shardtrain writer (prep fashion-mnist, prep synthetic,
// prep manifest for data written by other tools). It says what the shards
// hold (samples per shard, sample shape, dtype, classes), their sizes in
// bytes and a checksum of each file, so that a reader can check a split
// before reading it, and the stager can check a copy (docs/formats.md).
#pragma once

#include "io/dataset.h"
#include "io/shard_format.h"
#include "runtime/core/shape.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::io {

inline constexpr const char* kManifestFile = "manifest.json";

struct ManifestShard {
  std::string file;  // "part-00000.h5", relative to the split directory
  int64_t num_samples = 0;
  int64_t bytes = 0;   // file size
  uint32_t crc32 = 0;  // zlib CRC-32 of the whole file
};

struct Manifest {
  int64_t format_version = shard_format::kVersion;  // of every shard
  std::string split;
  int32_t num_classes = 0;
  Shape sample_shape;  // no batch dimension
  SampleDType dtype = SampleDType::u8;
  int64_t num_samples = 0;            // sum over shards
  std::vector<ManifestShard> shards;  // in shard order
};

// CRC-32 (zlib) of a whole file, or of `length` bytes from `offset` (fewer
// where the file ends first), read in large blocks. Errors name the file.
uint32_t file_crc32(const std::string& path, int64_t offset = 0, int64_t length = -1);

// <split_dir>/manifest.json
std::string manifest_path(const std::string& split_dir);

// One shard file's entry: its name, the given sample count, its size and
// checksum (reads the whole file).
ManifestShard describe_shard(const std::string& path, int64_t num_samples);

// Reads the shard headers and checksums every file of `split_dir`. The split
// must pass the checks of loading it (check_shard_set) first.
Manifest build_manifest(const std::string& split_dir);
// Writes <split_dir>/manifest.json atomically (temp file + rename), synced.
void write_manifest(const std::string& split_dir, const Manifest& manifest);
// write_manifest(split_dir, build_manifest(split_dir)): what every writer
// calls once its shards are in place. Returns the manifest written.
Manifest write_split_manifest(const std::string& split_dir);
// <split_dir>/manifest.json, or nullopt when there is none. A manifest that
// is not valid JSON or lacks a field is an Error naming the file.
std::optional<Manifest> read_manifest(const std::string& split_dir);
// A manifest's JSON text; errors are put in `where`'s context (a path, a URL).
Manifest parse_manifest(const std::string& text, const std::string& where);
// The manifest names the split's files: every listed shard is there with
// the stated size, and no other shard is. No file is opened with HDF5.
void check_manifest_lists_files(const std::string& split_dir, const Manifest& manifest);
// The manifest agrees with the files without reading their data: the same
// shard files, each of the stated size and sample count, shape, dtype and
// classes (headers from the files). Errors name the shard and what differs.
// Checksums are not read here (verify_shard does, for one file).
void check_manifest_against_files(const std::string& split_dir, const Manifest& manifest);
// The file at `path` has the size and CRC-32 the manifest states for `shard`.
// Error naming the file and both checksums when not.
void verify_shard(const std::string& path, const ManifestShard& shard);

}  // namespace shardtrain::io
