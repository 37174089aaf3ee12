// What the libFuzzer targets share: a scratch directory of their own, the
// input written to a file there (the code under test reads files, as it
// does in a job), and the one outcome a bad input may have besides success:
// a shardtrain::Error. Anything else (a crash, a sanitizer report, another
// exception, a hang, an allocation beyond libFuzzer's limit) is a finding.
//
// Seeds: with SHARDTRAIN_FUZZ_WRITE_SEEDS=<dir>, a target writes its seed
// inputs there and exits instead of fuzzing (scripts/fuzz.sh --seeds).
#pragma once

#include "runtime/core/error.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace shardtrain::fuzz {

// A fresh directory for this process, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "st-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  if (!out) std::abort();  // the scratch disk, not the input
}

// The directory to write seeds to, or "" when fuzzing.
inline std::string seed_dir() {
  const char* dir = std::getenv("SHARDTRAIN_FUZZ_WRITE_SEEDS");
  return dir == nullptr ? "" : dir;
}

// Runs fn(); an Error is the expected refusal of a bad input.
template <typename Fn>
void refusing_errors(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {  // ignored: a clear refusal is the right outcome
  }
}

}  // namespace shardtrain::fuzz
