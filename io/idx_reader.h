// Reads the gzip'ed idx files MNIST and Fashion-MNIST ship as
// (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS"): a big-endian header
// of magic number and dimensions, then the unsigned bytes, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::io {

// Magic numbers: 0x0000 (zero), 0x08 (unsigned byte), number of dimensions.
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // [n, rows, cols]
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // [n]

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // exactly the product of dims bytes
};

// Reads `path` (gzip-compressed). The magic number must equal
// `expected_magic`, and the payload must be exactly the declared size; a
// file that is not gzip, is empty, truncated or has trailing bytes is an
// Error naming the file and, where it applies, the byte counts.
IdxArray read_idx_gz(const std::string& path, uint32_t expected_magic);

}  // namespace shardtrain::io
