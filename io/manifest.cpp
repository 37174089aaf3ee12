// manifest.json: building it from the files, and its JSON form both ways.
// Reading validates every field, so that code using a Manifest (the checks,
// the stager) can trust it: file names are shard names (never a path that
// leaves the split directory), counts add up, checksums are 8 hex digits.
#include "io/manifest.h"

#include "io/shard_format.h"
#include "io/shard_set.h"
#include "runtime/core/error.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

namespace shardtrain::io {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Large sequential reads: the checksum of a multi-GB shard runs at disk speed.
constexpr size_t kCrcBlockBytes = size_t(4) << 20;

std::string crc_hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

// A field of `obj` (a JSON object) of the expected kind; `where` names it in
// errors ("shards[3].bytes").
const json& field(const json& obj, const char* name, const std::string& where) {
  const auto it = obj.find(name);
  ST_CHECK(it != obj.end(), "{}{} is missing", where, name);
  return *it;
}

int64_t int_field(const json& obj, const char* name, const std::string& where, int64_t min, int64_t max) {
  const json& v = field(obj, name, where);
  ST_CHECK(v.is_number_integer(), "{}{}: expected an integer, got {}", where, name, v.dump());
  const int64_t value = v.get<int64_t>();
  // An unsigned above INT64_MAX reads back negative: the range check catches it.
  ST_CHECK(value >= min && value <= max, "{}{} is {}, it must be in [{}, {}]", where, name, value, min, max);
  return value;
}

std::string string_field(const json& obj, const char* name, const std::string& where) {
  const json& v = field(obj, name, where);
  ST_CHECK(v.is_string(), "{}{}: expected a string, got {}", where, name, v.dump());
  return v.get<std::string>();
}

uint32_t parse_crc(const std::string& text, const std::string& where) {
  bool ok = text.size() == 8;
  uint32_t value = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    ok = ok && digit >= 0;
    value = (value << 4) | uint32_t(digit & 0xf);
  }
  ST_CHECK(ok, "{}crc32 is '{}', expected 8 hex digits", where, text);
  return value;
}

Manifest from_json(const json& j) {
  ST_CHECK(j.is_object(), "expected a JSON object");
  const std::string format = string_field(j, "format", "");
  ST_CHECK(format == shard_format::kFormat, "format is '{}', expected '{}'", format, shard_format::kFormat);
  const int64_t version = int_field(j, "format_version", "", INT64_MIN, INT64_MAX);
  ST_CHECK(version >= shard_format::kOldestVersion && version <= shard_format::kVersion,
           "format_version {} is not supported (this shardtrain reads versions {} to {})", version,
           shard_format::kOldestVersion, shard_format::kVersion);

  Manifest m;
  m.format_version = version;
  m.split = string_field(j, "split", "");
  ST_CHECK(!m.split.empty(), "split is empty");
  m.num_classes = int32_t(int_field(j, "num_classes", "", 1, INT32_MAX));

  const json& shape = field(j, "sample_shape", "");
  ST_CHECK(shape.is_array() && !shape.empty() && shape.size() <= size_t(Shape::kMaxDims),
           "sample_shape: expected a list of 1 to {} extents, got {}", Shape::kMaxDims, shape.dump());
  for (const json& d : shape) {
    ST_CHECK(d.is_number_integer() && d.get<int64_t>() > 0, "sample_shape: extent {} is not a positive integer",
             d.dump());
    m.sample_shape.push_back(d.get<int64_t>());
  }

  const std::string dtype = string_field(j, "dtype", "");
  const std::optional<SampleDType> parsed = parse_enum<SampleDType>(dtype);
  ST_CHECK(parsed.has_value(), "dtype is '{}', expected {}", dtype, enum_choices<SampleDType>());
  m.dtype = *parsed;
  m.num_samples = int_field(j, "num_samples", "", 1, INT64_MAX);

  const json& shards = field(j, "shards", "");
  ST_CHECK(shards.is_array() && !shards.empty(), "shards: expected a non-empty list, got {}",
           shards.is_array() ? "[]" : shards.dump());
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string where = fmt::format("shards[{}].", i);
    const json& s = shards[i];
    ST_CHECK(s.is_object(), "shards[{}]: expected an object, got {}", i, s.dump());
    ManifestShard shard;
    shard.file = string_field(s, "file", where);
    int index = 0;
    ST_CHECK(shard_format::parse_shard_file_name(shard.file, &index), "{}file '{}' is not a shard name part-NNNNN.h5",
             where, shard.file);
    // Shards are read in name order, so the manifest lists them in it.
    ST_CHECK(m.shards.empty() || m.shards.back().file < shard.file, "{}file '{}' is not after '{}' in name order",
             where, shard.file, m.shards.back().file);
    shard.num_samples = int_field(s, "num_samples", where, 0, INT64_MAX);
    shard.bytes = int_field(s, "bytes", where, 0, INT64_MAX);
    shard.crc32 = parse_crc(string_field(s, "crc32", where), where);
    total += shard.num_samples;
    m.shards.push_back(std::move(shard));
  }
  ST_CHECK(total == m.num_samples, "num_samples is {} but the shards hold {} together", m.num_samples, total);
  return m;
}

// ordered_json: the file reads top-down as docs/formats.md describes it.
nlohmann::ordered_json to_json(const Manifest& m) {
  using ojson = nlohmann::ordered_json;
  ojson shape = ojson::array();
  for (int i = 0; i < m.sample_shape.ndim(); ++i) shape.push_back(m.sample_shape[i]);
  ojson shards = ojson::array();
  for (const ManifestShard& s : m.shards) {
    shards.push_back(
        {{"file", s.file}, {"num_samples", s.num_samples}, {"bytes", s.bytes}, {"crc32", crc_hex(s.crc32)}});
  }
  return {{"format", shard_format::kFormat},
          {"format_version", m.format_version},
          {"split", m.split},
          {"num_classes", m.num_classes},
          {"sample_shape", shape},
          {"dtype", std::string(shard_format::dtype_name(m.dtype))},
          {"num_samples", m.num_samples},
          {"shards", shards}};
}

// Indented, but one line per shard: a split of thousands of shards stays a
// file one can read and diff.
std::string format_manifest(const nlohmann::ordered_json& j) {
  std::string out = "{\n";
  for (auto it = j.begin(); it != j.end(); ++it) {
    out += fmt::format("  {}: ", nlohmann::json(it.key()).dump());
    if (it.key() == "shards") {
      out += "[\n";
      for (size_t i = 0; i < it->size(); ++i) out += "    " + (*it)[i].dump() + (i + 1 < it->size() ? ",\n" : "\n");
      out += "  ]";
    } else {
      out += it->dump();
    }
    out += std::next(it) != j.end() ? ",\n" : "\n";
  }
  return out + "}\n";
}

// Writes `text` to `path` durably: the rename that follows must not expose
// a name whose data a crash could still lose.
void write_file_synced(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "{}: cannot create: {}", path, std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += size_t(n);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  ST_CHECK(rc == 0, "{}: fsync failed: {}", path, std::strerror(err));
}

}  // namespace

std::string manifest_path(const std::string& split_dir) { return (fs::path(split_dir) / kManifestFile).string(); }

uint32_t file_crc32(const std::string& path, int64_t offset, int64_t length) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  ::posix_fadvise(fd, offset, length < 0 ? 0 : length, POSIX_FADV_SEQUENTIAL);  // a hint: read ahead further
  std::unique_ptr<unsigned char[]> buffer(new unsigned char[kCrcBlockBytes]);
  uint32_t crc = 0;  // libdeflate's CRC-32 is zlib's, faster (io/shard_format.cpp)
  for (int64_t at = offset, left = length < 0 ? INT64_MAX : length; left > 0;) {
    const ssize_t n = ::pread(fd, buffer.get(), size_t(std::min<int64_t>(left, kCrcBlockBytes)), off_t(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: read failed: {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    crc = libdeflate_crc32(crc, buffer.get(), size_t(n));
    at += n;
    left -= n;
  }
  ::close(fd);
  return crc;
}

ManifestShard describe_shard(const std::string& path, int64_t num_samples) {
  ManifestShard shard;
  shard.file = fs::path(path).filename().string();
  shard.num_samples = num_samples;
  std::error_code ec;
  shard.bytes = int64_t(fs::file_size(path, ec));
  ST_CHECK(!ec, "{}: cannot read the file size: {}", path, ec.message());
  shard.crc32 = file_crc32(path);
  return shard;
}

Manifest build_manifest(const std::string& split_dir) {
  ST_CHECK(fs::is_directory(split_dir), "{}: not a directory (a manifest describes a split directory)", split_dir);
  // The same validation as loading: a manifest is only written for a split
  // that would load.
  const std::vector<ShardHeaderOf> shards = read_shard_headers(shard_format::list_shard_files(split_dir));
  check_shard_set(split_dir, shards);

  const shard_format::ShardHeader& h0 = shards.front().header;
  Manifest m;
  m.format_version = h0.version;
  m.split = h0.split;
  m.num_classes = h0.num_classes;
  m.sample_shape = h0.sample_shape;
  m.dtype = h0.dtype;
  for (const ShardHeaderOf& shard : shards) {
    m.shards.push_back(describe_shard(shard.path, shard.header.num_samples));
    m.num_samples += shard.header.num_samples;
  }
  ST_CHECK(m.num_samples > 0, "{}: the split has no samples", split_dir);
  return m;
}

void write_manifest(const std::string& split_dir, const Manifest& manifest) {
  const std::string path = manifest_path(split_dir);
  const std::string tmp = path + ".tmp";
  try {
    write_file_synced(tmp, format_manifest(to_json(manifest)));
  } catch (...) {
    std::error_code rm;
    fs::remove(tmp, rm);  // a failed write leaves no manifest.json.tmp behind
    throw;
  }
  std::error_code ec, remove_ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, remove_ec);  // best effort; the rename's error is the one to report
  ST_CHECK(!ec, "{}: cannot rename {} into place: {}", path, tmp, ec.message());
}

Manifest write_split_manifest(const std::string& split_dir) {
  Manifest manifest = build_manifest(split_dir);
  write_manifest(split_dir, manifest);
  return manifest;
}

Manifest parse_manifest(const std::string& text, const std::string& where) {
  return with_context(where, [&] {
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      // A syntax error (parse_error) or a number too large for a double
      // (out_of_range 406). e.what() is "[json.exception.parse_error.101]
      // parse error at line 3, ...": keep the useful part.
      std::string what = e.what();
      const size_t bracket = what.find("] ");
      throw Error("not valid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2)));
    }
    return from_json(j);
  });
}

std::optional<Manifest> read_manifest(const std::string& split_dir) {
  const std::string path = manifest_path(split_dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, "{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str(), path);
}

}  // namespace shardtrain::io
