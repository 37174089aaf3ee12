#include "cli/python_tool.h"

#include "runtime/core/error.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace shardtrain::cli {

void exec_python_tool(const std::string& script, const std::vector<std::string>& args) {
  const std::string path = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / script).string();
  ST_CHECK(std::filesystem::exists(path), "{}: the tool's script is missing (rebuild)", path);
  std::vector<std::string> all = {"/usr/bin/python3", path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(all.size() + 1);
  for (auto& arg : all) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  throw Error(fmt::format("cannot run /usr/bin/python3 (install python3-matplotlib: scripts/install-deps.sh): {}",
                          std::strerror(errno)));
}

}  // namespace shardtrain::cli
