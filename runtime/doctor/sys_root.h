// Reads the files a node describes itself with (/sys, /proc) under a root
// directory: "/" on a real node, a fixture tree in tests (and for
// `shardtrain doctor --sysroot`), so every probe runs the same code on both.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace shardtrain::doctor {

class SysRoot {
 public:
  explicit SysRoot(std::string root = "/");

  const std::string& root() const { return root_; }
  // The file's contents without trailing whitespace; nullopt when it cannot
  // be read (missing, or a sysfs attribute that answers EINVAL, like the
  // type of an unused GID entry).
  std::optional<std::string> read(const std::string& path) const;
  // Names in a directory, sorted; empty when it does not exist.
  std::vector<std::string> list(const std::string& dir) const;
  bool exists(const std::string& path) const;
  // The path with every link followed, relative to the root ("/sys/devices/
  // pci0000:00/0000:00:01.0/0000:01:00.0"); nullopt when it does not exist.
  std::optional<std::string> resolve(const std::string& path) const;

 private:
  std::string under_root(const std::string& path) const;
  std::string root_;
};

}  // namespace shardtrain::doctor
