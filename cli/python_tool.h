// Commands implemented by a Python tool that ships next to the program
// (tools/): Debian's /usr/bin/python3 with matplotlib, which
// scripts/install-deps.sh installs.
#pragma once

#include <string>
#include <vector>

namespace shardtrain::cli {

// Replaces the process with /usr/bin/python3 running `script` (a file in the
// directory of the shardtrain binary) with `args`; throws if it cannot.
[[noreturn]] void exec_python_tool(const std::string& script, const std::vector<std::string>& args);

}  // namespace shardtrain::cli
