#include "runtime/core/output_file.h"

#include "runtime/core/error.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace shardtrain {
namespace {
constinit std::atomic<bool> g_disk_full{false};  // an OptionalFile found no space
}  // namespace

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? fmt::format("{} ({})", std::strerror(err), name) : std::string(std::strerror(err));
}

void reset_disk_full_for_testing() { g_disk_full.store(false); }

bool write_optional_file(const std::string& path, std::string_view text) noexcept {
  try {
    OptionalFile f(path, "w");
    const bool written = f.write(text);
    f.close();
    return written;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardtrain: warning: %s\n", e.what());
    return false;
  }
}

OptionalFile::OptionalFile(std::string path, const char* mode) : path_(std::move(path)) {
  f_ = std::fopen(path_.c_str(), mode);
  ST_CHECK(f_ != nullptr, "{}: cannot open for writing: {}", path_, errno_text(errno));
}

OptionalFile::~OptionalFile() { close(); }

OptionalFile::OptionalFile(OptionalFile&& other) noexcept
    : path_(std::move(other.path_)), f_(std::exchange(other.f_, nullptr)) {}

OptionalFile& OptionalFile::operator=(OptionalFile&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    f_ = std::exchange(other.f_, nullptr);
  }
  return *this;
}

bool OptionalFile::write(std::string_view text) {
  if (f_ == nullptr) return false;
  if (g_disk_full.load()) {
    fail(ENOSPC);
    return false;
  }
  errno = 0;
  const bool written = std::fwrite(text.data(), 1, text.size(), f_) == text.size();
  if (!written || std::fflush(f_) != 0) {
    fail(errno != 0 ? errno : EIO);
    return false;
  }
  return true;
}

void OptionalFile::close() {
  if (f_ == nullptr) return;
  errno = 0;
  const bool failed = std::ferror(f_) != 0;
  const bool close_failed = std::fclose(f_) != 0;
  f_ = nullptr;
  if (failed || close_failed) fail(errno != 0 ? errno : EIO);
}

void OptionalFile::fail(int err) {
  if (err == ENOSPC) g_disk_full.store(true);
  std::fprintf(stderr,
               "shardtrain: warning: %s: write failed: %s; nothing more is written to this file, training goes on\n",
               path_.c_str(), errno_text(err).c_str());
  if (f_ != nullptr) std::fclose(f_);
  f_ = nullptr;
}

}  // namespace shardtrain
