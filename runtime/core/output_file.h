// A run's files meet a full disk: every write is checked when it happens.
// Results (metrics.jsonl, result.json: runtime/train/run_dir) end the job
// with the cause. Telemetry files (step records, traces, the MLLOG) are an
// OptionalFile: the first failed write prints one warning naming the file
// and the cause, later writes do nothing, and training goes on. Once one of
// them finds the disk full, all of them stop at their next write, so that
// the space the results have in reserve is left to them.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace shardtrain {

// "No space left on device (ENOSPC)": the message and the name to search for.
std::string errno_text(int err);

// Writes a whole optional file (a summary): never throws; false after the
// one warning when it cannot be created or written.
bool write_optional_file(const std::string& path, std::string_view text) noexcept;

class OptionalFile {
 public:
  OptionalFile() = default;
  // Opens `path` ("w" or "a"); a file that cannot be created is an Error
  // (that is a set-up problem, not a full disk mid-run).
  OptionalFile(std::string path, const char* mode);
  ~OptionalFile();
  OptionalFile(OptionalFile&& other) noexcept;
  OptionalFile& operator=(OptionalFile&& other) noexcept;
  OptionalFile(const OptionalFile&) = delete;
  OptionalFile& operator=(const OptionalFile&) = delete;

  // Writes `text` and flushes it to the kernel (a job that ends in
  // MPI_Abort or _exit drops stdio's buffer); false once a write failed.
  bool write(std::string_view text);
  // Whether it is open and no write has failed.
  bool ok() const { return f_ != nullptr; }
  const std::string& path() const { return path_; }
  // Closes it; a failure to close is the same one warning.
  void close();

 private:
  void fail(int err);  // the warning, then closed for good

  std::string path_;
  std::FILE* f_ = nullptr;
};

// Forgets that a file found the disk full (tests run several cases in one
// process).
void reset_disk_full_for_testing();

}  // namespace shardtrain
