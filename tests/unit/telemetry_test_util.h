// Helpers shared by the telemetry tests: a fresh directory per test, and a
// JSON file read back whole.
#pragma once

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace shardtrain::telemetry::testing {

// <temp>/shardtrain-<suite>-<pid>-<name>, emptied: the pid keeps concurrent
// test processes (ctest -j) apart.
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardtrain-" + suite + "-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace shardtrain::telemetry::testing
