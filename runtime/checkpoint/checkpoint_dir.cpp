#include "runtime/checkpoint/checkpoint_dir.h"

#include "runtime/core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>

namespace shardtrain::checkpoint {
namespace fs = std::filesystem;

namespace {
// A function-local static: a regex's constructor may throw, which a
// namespace-scope one would do before main could catch it.
const std::regex& checkpoint_name() {
  static const std::regex name(R"(step-(\d{8,})\.h5(\.tmp.*)?)");
  return name;
}

struct Entry {
  std::string path;
  int64_t step = 0;
  bool complete = false;
};

std::vector<Entry> scan(const std::string& dir) {
  std::vector<Entry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, checkpoint_name())) continue;
    out.push_back({e.path().string(), std::stoll(m[1].str()), !m[2].matched});
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.step < b.step; });
  return out;
}
}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  return (fs::path(dir) / fmt::format("step-{:08d}.h5", step)).string();
}

std::vector<Listed> list_checkpoints(const std::string& dir) {
  std::vector<Listed> out;
  for (const Entry& e : scan(dir))
    if (e.complete) out.push_back({e.path, e.step});
  return out;
}

std::optional<Listed> latest_checkpoint(const std::string& dir) {
  const auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<std::string> keep_latest(const std::string& dir, int64_t keep) {
  const std::vector<Entry> all = scan(dir);
  int64_t complete = 0, newest = -1;
  for (const Entry& e : all)
    if (e.complete) {
      ++complete;
      newest = std::max(newest, e.step);
    }
  std::vector<std::string> removed;
  int64_t seen = 0;
  for (const Entry& e : all) {
    const bool drop = e.complete ? complete - seen++ > keep : e.step < newest;
    std::error_code ec;
    if (drop && fs::remove(e.path, ec)) removed.push_back(e.path);
  }
  return removed;
}

std::vector<std::string> set_aside_newer_than(const std::string& dir, int64_t step, const std::string& tag) {
  std::vector<std::string> moved;
  for (const Entry& e : scan(dir)) {
    if (!e.complete || e.step <= step) continue;
    const std::string to = e.path + ".superseded-" + tag;
    std::error_code ec;
    fs::rename(e.path, to, ec);
    ST_CHECK(!ec, "cannot set {} aside as {}: {}", e.path, to, ec.message());
    moved.push_back(to);
  }
  return moved;
}

}  // namespace shardtrain::checkpoint
