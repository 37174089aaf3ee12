#include "io/shard_format.h"

#include "runtime/core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <filesystem>

#include <libdeflate.h>

namespace shardtrain::io::shard_format {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "sample_crc32 hashes memory as little-endian bytes");

// libdeflate's CRC-32 is zlib's (the same values), about 4x as fast: the
// loaders check every sample they read (docs/BENCHMARKS.md).
uint32_t sample_crc32(const void* sample, size_t bytes, int32_t label) {
  return sample_crc32_finish(sample_crc32_update(0, sample, bytes), label);
}

uint32_t sample_crc32_update(uint32_t crc, const void* bytes, size_t n) { return libdeflate_crc32(crc, bytes, n); }

uint32_t sample_crc32_finish(uint32_t crc, int32_t label) { return libdeflate_crc32(crc, &label, sizeof label); }

void throw_checksum_mismatch(const std::string& path, const ChecksumMismatch& m) {
  const std::string which = m.failed == 1
                                ? fmt::format("sample {} (of the {} read) fails its checksum", m.first, m.checked)
                                : fmt::format("{} samples in [{}, {}] (of the {} read) fail their checksums", m.failed,
                                              m.first, m.last, m.checked);
  throw Error(fmt::format(
      "{}: {}: {}, {} and {} disagree ({}[{}] is {:08x}, the sample and its label give {:08x}). The shard is "
      "corrupt: restore it from a good copy or write it again (shardtrain prep)",
      path, which, kX, kY, kChecksums, kChecksums, m.example, m.stored, m.computed));
}

std::string shard_file_name(int index) {
  ST_CHECK(index >= 0 && index <= 99999, "shard index {} does not fit part-NNNNN.h5", index);
  return fmt::format("part-{:05d}.h5", index);
}

bool parse_shard_file_name(const std::string& name, int* index) {
  // "part-" + 5 digits + ".h5"
  if (name.size() != 13 || !name.starts_with("part-") || !name.ends_with(".h5")) return false;
  int value = 0;
  for (size_t i = 5; i < 10; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
    value = value * 10 + (name[i] - '0');
  }
  *index = value;
  return true;
}

std::vector<std::string> list_shard_files(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  ST_CHECK(fs::exists(status), "{}: no such file or directory", path);
  if (!fs::is_directory(status)) return {path};

  std::vector<std::string> names;
  // increment(ec) rather than a range-for: a listing failure becomes an Error,
  // not a std::filesystem exception.
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int index = 0;
    if (parse_shard_file_name(name, &index)) {
      names.push_back(name);
    } else {
      ST_CHECK(!(name.starts_with("part-") && name.ends_with(".h5")),
               "{}: shard file name '{}' is not of the form part-NNNNN.h5 (5 digits)", path, name);
    }
  }
  ST_CHECK(!ec, "{}: cannot list directory: {}", path, ec.message());
  ST_CHECK(!names.empty(), "{}: no shard files (part-NNNNN.h5) in this directory", path);
  std::sort(names.begin(), names.end());

  std::vector<std::string> files;
  files.reserve(names.size());
  for (const std::string& name : names) files.push_back((fs::path(path) / name).string());
  return files;
}

}  // namespace shardtrain::io::shard_format
