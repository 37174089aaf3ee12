#include "runtime/doctor/sys_root.h"

#include <algorithm>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace shardtrain::doctor {

SysRoot::SysRoot(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string SysRoot::under_root(const std::string& path) const {
  if (root_ == "/" || root_.empty()) return path;
  return root_ + path;
}

std::optional<std::string> SysRoot::read(const std::string& path) const {
  // read(2), not a stream: a sysfs attribute that cannot be read opens fine
  // and fails on read (EINVAL), which a stream reports as an empty file.
  const int fd = ::open(under_root(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string s;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, size_t(n));
  ::close(fd);
  if (n < 0) return std::nullopt;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\0')) s.pop_back();
  return s;
}

std::vector<std::string> SysRoot::list(const std::string& dir) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(under_root(dir), ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool SysRoot::exists(const std::string& path) const {
  std::error_code ec;
  return fs::exists(under_root(path), ec);
}

std::optional<std::string> SysRoot::resolve(const std::string& path) const {
  std::error_code ec;
  const fs::path real = fs::canonical(under_root(path), ec);
  if (ec) return std::nullopt;
  std::string s = real.string();
  if (root_ == "/" || root_.empty()) return s;
  const std::string base = fs::canonical(root_, ec).string();
  if (ec || s.compare(0, base.size(), base) != 0) return std::nullopt;  // a link out of the tree
  s = s.substr(base.size());
  return s.empty() ? "/" : s;
}

}  // namespace shardtrain::doctor
