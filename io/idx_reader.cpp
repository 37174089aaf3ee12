#include "io/idx_reader.h"

#include "runtime/core/error.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <memory>

namespace shardtrain::io {

namespace {

struct GzClose {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

// Reads up to `n` bytes, fewer only at the end of the data. A zlib error
// (corrupt or cut-off gzip stream) is an Error.
size_t read_up_to(gzFile f, const std::string& path, uint8_t* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const unsigned want = unsigned(std::min<size_t>(n - done, size_t(1) << 30));
    const int got = gzread(f, out + done, want);
    if (got < 0) {
      int code = 0;
      throw Error(fmt::format("{}: gzip data is corrupt or cut off ({})", path, gzerror(f, &code)));
    }
    if (got == 0) break;
    done += size_t(got);
  }
  return done;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

}  // namespace

IdxArray read_idx_gz(const std::string& path, uint32_t expected_magic) {
  std::error_code ec;
  ST_CHECK(std::filesystem::is_regular_file(path, ec), "{}: no such file", path);
  ST_CHECK(std::filesystem::file_size(path, ec) > 0, "{}: file is empty", path);
  GzFile f(gzopen(path.c_str(), "rb"));
  ST_CHECK(f != nullptr, "{}: cannot open", path);
  gzbuffer(f.get(), 1 << 20);  // fewer, larger reads of the compressed file

  uint8_t header[4];
  const size_t got = read_up_to(f.get(), path, header, 4);
  // zlib reads a non-gzip file "transparently" as-is; the idx files are
  // always compressed, so anything else is the wrong file.
  ST_CHECK(gzdirect(f.get()) == 0, "{}: not a gzip file", path);
  ST_CHECK(got == 4, "{}: truncated header ({} of 4 bytes)", path, got);
  const uint32_t magic = big_endian_u32(header);
  ST_CHECK(magic == expected_magic, "{}: magic number 0x{:08x}, expected 0x{:08x} ({})", path, magic, expected_magic,
           expected_magic == kIdxImagesMagic ? "idx3 images" : "idx1 labels");

  IdxArray array;
  const size_t ndims = magic & 0xff;
  std::vector<uint8_t> dim_bytes(4 * ndims);
  ST_CHECK(read_up_to(f.get(), path, dim_bytes.data(), dim_bytes.size()) == dim_bytes.size(),
           "{}: truncated header (dimensions)", path);
  int64_t payload = 1;
  for (size_t i = 0; i < ndims; ++i) {
    const int64_t d = big_endian_u32(&dim_bytes[4 * i]);
    array.dims.push_back(d);
    payload *= d;
    // Bounded so that a corrupt header cannot overflow the product.
    ST_CHECK(payload <= (int64_t(1) << 40), "{}: implausible dimensions {}", path, dims_str(array.dims));
  }

  // Grow while reading rather than trusting the header with one allocation:
  // a truncated file with a large declared size fails on its byte count.
  size_t have = 0;
  while (have < size_t(payload)) {
    array.data.resize(std::min(size_t(payload), std::max<size_t>(2 * have, size_t(64) << 20)));
    const size_t n = read_up_to(f.get(), path, array.data.data() + have, array.data.size() - have);
    have += n;
    if (have < array.data.size()) break;
  }
  if (have != size_t(payload)) {
    // zlib returns what it could decompress of a cut-off stream and flags it.
    int code = Z_OK;
    gzerror(f.get(), &code);
    throw Error(fmt::format("{}: truncated{}: payload is {} bytes, the header ({}) declares {}", path,
                            code == Z_BUF_ERROR ? " (the gzip stream is cut off)" : "", have, dims_str(array.dims),
                            payload));
  }

  uint8_t extra[1 << 16];
  size_t trailing = 0;
  for (size_t n; (n = read_up_to(f.get(), path, extra, sizeof extra)) > 0;) trailing += n;
  ST_CHECK(trailing == 0, "{}: {} bytes of trailing garbage after the declared payload of {} bytes ({})", path,
           trailing, payload, dims_str(array.dims));
  return array;
}

}  // namespace shardtrain::io
